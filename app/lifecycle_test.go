package app

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/configdb/dbtest"
	"github.com/opsfirehose/firehose/internal/testkit"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// migrationLock is the advisory lock ConfigDB's migrations take on
// PostgreSQL (configdb/store.go), so that two bridges never migrate at once.
const migrationLock = 7305614902

// A SIGTERM while New waits on PostgreSQL (here: for the migration lock
// another bridge holds) ends New at once with ctx's error, instead of after
// the minute New allows the database.
func TestNewReturnsWhenCancelledDuringMigrations(t *testing.T) {
	dsn := dbtest.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	other, err := db.Conn(t.Context()) // the other bridge, migrating
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	if _, err := other.ExecContext(t.Context(), `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t)
	cfg.ConfigDB.DSN = dsn
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		b, err := New(ctx, cfg, zerolog.Nop())
		if err == nil {
			_ = b.Close(context.Background())
		}
		done <- err
	}()
	// New is waiting for the lock once PostgreSQL says a session of this
	// database waits on an advisory lock.
	testkit.Eventually(t, func() bool {
		var n int
		err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}, "New to wait for the migration lock")
	select {
	case err := <-done:
		t.Fatalf("New returned before the cancel: %v", err)
	default:
	}

	cancel() // SIGTERM
	// Well within the minute New would otherwise wait: a prompt return takes
	// milliseconds, and this bound only keeps a busy machine from failing it.
	const prompt = 20 * time.Second
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("New returned %v, want an error wrapping context.Canceled", err)
		}
	case <-time.After(prompt):
		t.Fatalf("New still waits %s after its ctx was cancelled", prompt)
	}
}
