// Package pgtemp runs a throwaway PostgreSQL cluster for tests and
// benchmarks: initdb into a temporary directory, postgres on a free loopback
// port, trust authentication, fsync off. As root it runs the server as the
// postgres user, since PostgreSQL refuses to run as root.
//
// It must never be used for data anyone wants to keep.
package pgtemp

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/opsfirehose/firehose/internal/freeport"
)

// ErrNotInstalled is returned by Start when no PostgreSQL server binaries
// are found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found in $PATH or /usr/lib/postgresql/*/bin")

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	dir   string
	port  int
	cmd   *exec.Cmd
	done  chan struct{}
	admin *sql.DB
	log   *bytes.Buffer
	// releasePort gives back the port reserved for the server.
	releasePort func()
}

// FindBin returns the directory holding initdb and postgres: where $PATH
// has them, else Debian's /usr/lib/postgresql/<version>/bin, newest first.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(real), nil
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// Start creates and starts a cluster. Stop removes it.
func Start(ctx context.Context) (_ *Cluster, err error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	base := ""
	if os.Geteuid() == 0 {
		if cred, err = serverUser(); err != nil {
			return nil, err
		}
		if base, err = reachableTempDir(cred.Uid, cred.Gid); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(base, "firehose-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, done: make(chan struct{}), log: &bytes.Buffer{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir // the caller's directory may be closed to the postgres user
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A reserved port: one merely free a moment ago may be taken by
	// another test before postgres binds it.
	if c.port, c.releasePort, err = freeport.Reserve(); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(c.port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300")
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	c.cmd.Dir = dir
	// Pdeathsig: a test binary that dies does not leave a server behind.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	if c.admin, err = sql.Open("pgx", c.DSN("postgres")); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = c.admin.PingContext(pctx)
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("postgres exited while starting:\n%s", c.log.String())
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres did not accept connections within 60s: %w\n%s", err, c.log.String())
		}
		time.Sleep(50 * time.Millisecond) // between probes of a server that is starting
	}
}

// serverUser is whom the server runs as when we are root: the postgres user
// that Debian's postgresql package creates.
func serverUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as (install Debian's postgresql package, which creates one): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachableTempDir returns a directory for the cluster that the server's user
// can reach: $TMPDIR when every directory on its way may be searched by that
// user (a root-only $TMPDIR, such as one under /root, may not), else /tmp.
func reachableTempDir(uid, gid uint32) (string, error) {
	for _, dir := range []string{os.TempDir(), "/tmp"} {
		if searchable(dir, uid, gid) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("neither $TMPDIR (%s) nor /tmp can be reached by the postgres user (uid %d); set TMPDIR to a directory it can search", os.TempDir(), uid)
}

// searchable reports whether a user may reach dir: whether every directory
// from / to dir grants it search (x) permission. Supplementary groups are
// not considered, so the answer errs on the side of no.
func searchable(dir string, uid, gid uint32) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := fi.Mode().Perm()
		var can bool
		switch {
		case st.Uid == uid:
			can = mode&0o100 != 0
		case st.Gid == gid:
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if !can {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// DSN is the URL of a database of the cluster.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// CreateDatabase creates an empty database and returns its DSN.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	if _, err := c.admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// Stop shuts the server down and removes its files.
func (c *Cluster) Stop() {
	if c.admin != nil {
		_ = c.admin.Close()
	}
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: nothing here is kept
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if c.releasePort != nil {
		c.releasePort()
	}
	_ = os.RemoveAll(c.dir)
}
