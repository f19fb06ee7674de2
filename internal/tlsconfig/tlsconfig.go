// Package tlsconfig turns the cert_file/key_file settings that every listener
// shares (HTTP, MQTT over TCP, MQTT over WebSocket) into a *tls.Config that
// picks up renewed certificates without a restart.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Files is the YAML shape of a listener's TLS settings.
type Files struct {
	// CertFile and KeyFile are PEM files. Both are required.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, requires clients to present a certificate signed by one of its CAs.
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string `yaml:"min_version"`
}

// Validate checks that the files exist and form a usable key pair, so that a
// bad path fails at start-up with the key's name rather than at the first handshake.
func (f *Files) Validate() error {
	var p strictyaml.Problems
	if f.CertFile == "" {
		p.Add("cert_file", "required when tls is set")
	}
	if f.KeyFile == "" {
		p.Add("key_file", "required when tls is set")
	}
	if f.MinVersion != "" && f.MinVersion != "1.2" && f.MinVersion != "1.3" {
		p.Add("min_version", "%q is not supported; use 1.2 or 1.3", f.MinVersion)
	}
	if p.Err() == nil {
		if _, err := f.Server(); err != nil {
			p.Wrap("", err)
		}
	}
	return p.Err()
}

// Server returns a server-side *tls.Config. The certificate is re-read when the
// files change on disk (checked at most every few seconds), so a certbot renewal
// needs no restart. Errors name the setting at fault.
func (f *Files) Server() (*tls.Config, error) {
	r := &reloader{certFile: f.CertFile, keyFile: f.KeyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
	}
	if f.MinVersion == "1.3" {
		cfg.MinVersion = tls.VersionTLS13
	}
	if f.ClientCAFile != "" {
		pool, err := certPool("client_ca_file", f.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// certPool reads the PEM file at path, the value of key, into a pool of CAs.
func certPool(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, keyErr(key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, keyErr(key, fmt.Errorf("%s holds no PEM certificate", path))
	}
	return pool, nil
}

// keyPair loads cert_file and key_file, with an error that names them.
func keyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, keyErr("cert_file", fmt.Errorf("with key_file %s: %w", keyFile, err))
	}
	return cert, nil
}

// recheckEvery bounds how often a handshake stats the files.
const recheckEvery = 5 * time.Second

type reloader struct {
	certFile, keyFile string

	mu        sync.Mutex
	cert      *tls.Certificate
	modTime   time.Time
	checkedAt time.Time
}

func (r *reloader) load() error {
	mod, err := r.newestModTime()
	if err != nil {
		return err
	}
	cert, err := keyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cert, r.modTime, r.checkedAt = &cert, mod, time.Now()
	r.mu.Unlock()
	return nil
}

func (r *reloader) newestModTime() (time.Time, error) {
	var newest time.Time
	var errs []error
	for _, f := range []struct{ key, path string }{{"cert_file", r.certFile}, {"key_file", r.keyFile}} {
		st, err := os.Stat(f.path)
		if err != nil {
			errs = append(errs, keyErr(f.key, err))
			continue
		}
		if st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	return newest, errors.Join(errs...)
}

func (r *reloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	cert, due := r.cert, time.Since(r.checkedAt) > recheckEvery
	if due {
		r.checkedAt = time.Now()
	}
	modTime := r.modTime
	r.mu.Unlock()
	if !due {
		return cert, nil
	}
	// A renewal in progress can leave the pair mismatched for a moment; keep
	// serving the old certificate until both files load.
	if mod, err := r.newestModTime(); err == nil && mod.After(modTime) {
		_ = r.load()
		r.mu.Lock()
		cert = r.cert
		r.mu.Unlock()
	}
	return cert, nil
}

// keyErr names the setting at fault, so errors read "cert_file: open x.pem: ..."
// both at start-up (re-rooted under the listener's path) and at run time.
func keyErr(key string, err error) error {
	return &strictyaml.KeyError{Key: key, Err: err}
}
