// Package dbtest gives ConfigDB's tests their databases: a SQLite file in the
// test's temporary directory, and a fresh database in one throwaway
// PostgreSQL cluster per test binary (started on first use, stopped by Main).
// With $FIREHOSE_TEST_POSTGRES set to a postgres:// URL of a server where it
// may create databases, that server is used instead.
//
// Where PostgreSQL is not installed the PostgreSQL half of a test is skipped,
// or fails under CI=true (testkit.RequireCommand), where .ci/run installs
// Debian's postgresql package; installed but failing to start is a failure.
// It is imported only by tests.
package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/pgtemp"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// server is the PostgreSQL the tests of one binary share.
var server struct {
	once    sync.Once
	cluster *pgtemp.Cluster
	admin   *sql.DB
	base    *url.URL
	err     error
	n       atomic.Int64
}

// Main runs the package's tests, then stops the PostgreSQL cluster if one was
// started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if server.cluster != nil {
		server.cluster.Stop()
	}
	if server.admin != nil {
		_ = server.admin.Close()
	}
	os.Exit(code)
}

// Each runs f as two subtests, "sqlite" and "postgres", each with the DSN of
// a fresh, empty database.
func Each(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { f(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, Postgres(t)) })
}

// SQLite returns the path of a database file in the test's temporary directory.
func SQLite(t testing.TB) string {
	return filepath.Join(t.TempDir(), "configdb.sqlite")
}

// Postgres returns the DSN of a fresh database.
func Postgres(t testing.TB) string {
	t.Helper()
	server.once.Do(startServer)
	if errors.Is(server.err, pgtemp.ErrNotInstalled) {
		// Skipped where PostgreSQL is not installed, a failure under CI=true,
		// where .ci/run installs Debian's postgresql package.
		testkit.RequireCommand(t, "initdb")
	}
	if server.err != nil {
		t.Fatalf("PostgreSQL: %v", server.err)
	}
	name := fmt.Sprintf("configdb_test_%d_%d", os.Getpid(), server.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := server.admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatal(err)
	}
	if server.cluster == nil {
		t.Cleanup(func() {
			_, _ = server.admin.ExecContext(context.Background(), `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
		})
	}
	u := *server.base
	u.Path = "/" + name
	return u.String()
}

func startServer() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if dsn := os.Getenv("FIREHOSE_TEST_POSTGRES"); dsn != "" {
		if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
			server.err = fmt.Errorf("FIREHOSE_TEST_POSTGRES must be a postgres:// URL")
			return
		}
		server.base, server.err = url.Parse(dsn)
		if server.err != nil {
			return
		}
		server.admin, server.err = sql.Open("pgx", dsn)
		if server.err == nil {
			server.err = server.admin.PingContext(ctx)
		}
		return
	}
	server.cluster, server.err = pgtemp.Start(ctx)
	if server.err != nil {
		return
	}
	server.base, _ = url.Parse(server.cluster.DSN("postgres"))
	server.admin, server.err = sql.Open("pgx", server.cluster.DSN("postgres"))
}
