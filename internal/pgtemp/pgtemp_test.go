package pgtemp

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestStartStop starts a real cluster (as the postgres user when the test
// runs as root, as CI does), uses a database of it, and checks that Stop
// leaves nothing behind.
func TestStartStop(t *testing.T) {
	if _, err := FindBin(); errors.Is(err, ErrNotInstalled) {
		testkit.RequireCommand(t, "initdb")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	dsn, err := c.CreateDatabase(ctx, "pgtemp_test")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&got); err != nil || got != "pgtemp_test" {
		t.Fatalf("current_database() = %q, %v", got, err)
	}
	_ = db.Close()
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: the server's files belong to
		// the user it runs as.
		cred, err := serverUser()
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(c.dir, "data"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != cred.Uid {
			t.Fatalf("the data directory belongs to uid %d, want the postgres user's %d", uid, cred.Uid)
		}
	}
	c.Stop()
	stopped = true
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("%s is left behind: %v", c.dir, err)
	}
}

func TestSearchable(t *testing.T) {
	me, myGroup := uint32(os.Getuid()), uint32(os.Getgid())
	other, otherGroup := me+4242, myGroup+4242

	closed := t.TempDir() // 0700, as os.MkdirTemp makes it
	inside := filepath.Join(closed, "inside")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dir      string
		uid, gid uint32
		want     bool
	}{
		{"the owner", inside, me, myGroup, true},
		{"another user behind a 0700 parent", inside, other, otherGroup, false},
		{"the root directory", "/", other, otherGroup, true},
		{"a missing directory", filepath.Join(closed, "missing"), me, myGroup, false},
	} {
		if got := searchable(c.dir, c.uid, c.gid); got != c.want {
			t.Errorf("%s: searchable(%s, %d, %d) = %v, want %v", c.name, c.dir, c.uid, c.gid, got, c.want)
		}
	}
	if err := os.Chmod(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	// Only if every ancestor of the test's directory is open to others too.
	if searchable(filepath.Dir(closed), other, otherGroup) && !searchable(inside, other, otherGroup) {
		t.Error("0711 lets others search, but searchable says no")
	}
}
