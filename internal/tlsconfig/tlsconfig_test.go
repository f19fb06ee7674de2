package tlsconfig

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
)

func TestValidateNamesTheSettingAtFault(t *testing.T) {
	certs := testkit.TLS(t)
	tests := []struct {
		files Files
		want  string
	}{
		{Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile}, ""},
		{Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile, MinVersion: "1.3", ClientCAFile: certs.CAFile}, ""},
		{Files{KeyFile: certs.KeyFile}, "cert_file: required when tls is set"},
		{Files{CertFile: "/nonexistent.pem", KeyFile: certs.KeyFile}, "cert_file: stat /nonexistent.pem"},
		{Files{CertFile: certs.CertFile, KeyFile: "/nonexistent.pem"}, "key_file: stat /nonexistent.pem"},
		{Files{CertFile: certs.KeyFile, KeyFile: certs.CertFile}, "cert_file: with key_file"},
		{Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile, ClientCAFile: certs.KeyFile}, "client_ca_file: " + certs.KeyFile + " holds no PEM certificate"},
		{Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile, MinVersion: "1.0"}, `min_version: "1.0" is not supported`},
	}
	for _, tt := range tests {
		err := tt.files.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tt.files, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.files, err, tt.want)
		}
	}
}

func TestRenewedCertificateIsPickedUp(t *testing.T) {
	old, renewed := testkit.TLS(t), testkit.TLS(t)
	r := &reloader{certFile: old.CertFile, keyFile: old.KeyFile}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	first, _ := r.getCertificate(nil)

	// certbot replaces both files; their modification time moves forward.
	for src, dst := range map[string]string{renewed.CertFile: old.CertFile, renewed.KeyFile: old.KeyFile} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Minute)
		if err := os.Chtimes(dst, future, future); err != nil {
			t.Fatal(err)
		}
	}
	if same, _ := r.getCertificate(nil); !bytes.Equal(same.Certificate[0], first.Certificate[0]) {
		t.Fatal("files were re-read before the recheck interval")
	}
	r.mu.Lock()
	r.checkedAt = time.Time{} // the interval has passed
	r.mu.Unlock()
	now, _ := r.getCertificate(nil)
	if bytes.Equal(now.Certificate[0], first.Certificate[0]) {
		t.Fatal("renewed certificate not picked up")
	}
}
