package configdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/opsfirehose/firehose/topics"
)

// Options carries what the store needs besides its DSN.
type Options struct {
	// Topics builds the topics of the events recorded in the outbox.
	Topics topics.ConfigDB
	// Now is the clock for versions and events; nil means time.Now.
	Now func() time.Time
	// CacheSize bounds the memory of cached effective documents, in bytes;
	// 0 turns the cache off.
	CacheSize int64
	// MaxConns bounds the connections: SQLite readers, or the PostgreSQL
	// pool. 0 means 8.
	MaxConns int
}

// Store is a ConfigDB database. It is safe for concurrent use, also by
// several processes sharing one PostgreSQL database.
type Store struct {
	d    dialect
	w    *sql.DB // writes; for SQLite one connection, BEGIN IMMEDIATE
	r    *sql.DB // reads; the same pool as w for PostgreSQL
	opts Options

	cache *cache
	// merger builds effective documents, reusing its scratch buffers.
	merger merger
	// gens reads an environment's and the catalog's generations, to check
	// a cached merge with one query (PostgreSQL, where other bridges write).
	gens *sql.Stmt

	// local is set for SQLite, where this process is the only writer (lock
	// holds the lock that makes sure): cached merges are then checked against
	// epochs counted in memory, bumped after each commit, without a query.
	local        bool
	lock         *os.File
	envEpochs    sync.Map // int64 -> *atomic.Int64
	catalogEpoch atomic.Int64
}

//go:embed migrations/*.sql
var migrations embed.FS

// Open opens the database named by dsn, a postgres:// URL or a SQLite file
// path (its directory is created if missing), and brings its schema up to
// date. Close releases it.
func Open(ctx context.Context, dsn string, opts Options) (_ *Store, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 8
	}
	s := &Store{opts: opts}
	if opts.CacheSize > 0 {
		s.cache = newCache(opts.CacheSize)
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if IsPostgres(dsn) {
		s.d = postgresDialect
		if s.w, err = sql.Open(s.d.driver, dsn); err != nil {
			return nil, fmt.Errorf("configdb: %w", err)
		}
		s.w.SetMaxOpenConns(opts.MaxConns)
		s.w.SetMaxIdleConns(opts.MaxConns)
		s.r = s.w
	} else {
		s.d = sqliteDialect
		if err := openSQLite(s, dsn, opts.MaxConns); err != nil {
			return nil, err
		}
	}
	if err := s.w.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("configdb: connecting to the %s database: %w", s.d.name, err)
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	s.gens, err = s.r.PrepareContext(ctx, s.d.q(`SELECT e.generation, m.value FROM environments e, configdb_meta m
		WHERE e.id = ? AND m.name = 'catalog_generation'`))
	if err != nil {
		return nil, fmt.Errorf("configdb: %w", err)
	}
	return s, nil
}

func openSQLite(s *Store, path string, readers int) error {
	if strings.ContainsAny(path, "?#") {
		return fmt.Errorf("configdb: the SQLite path %q may not contain ? or #", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("configdb: %w", err)
		}
	}
	// One process per SQLite file: a second bridge would serve merges its
	// cache does not know are stale, and relay the same outbox.
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("configdb: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return fmt.Errorf("configdb: %s is in use by another bridge (%v); a SQLite ConfigDB serves one bridge: use PostgreSQL to run several", path, err)
	}
	s.lock, s.local = lock, true
	// WAL lets readers run beside the writer; synchronous=FULL makes a commit
	// survive a power loss, since a 2xx promises the change is stored.
	base := path + "?_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL"
	if s.w, err = sql.Open(s.d.driver, base+"&_txlock=immediate"); err != nil {
		return fmt.Errorf("configdb: %w", err)
	}
	// SQLite takes one writer at a time; one connection queues writers in Go
	// instead of having them spin on SQLITE_BUSY.
	s.w.SetMaxOpenConns(1)
	if s.r, err = sql.Open(s.d.driver, base+"&_txlock=deferred&_query_only=1"); err != nil {
		return fmt.Errorf("configdb: %w", err)
	}
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	return nil
}

// Close closes the database. It is safe to call more than once.
func (s *Store) Close() error {
	var errs []error
	if s.gens != nil {
		errs = append(errs, s.gens.Close())
		s.gens = nil
	}
	if s.r != nil && s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	s.r, s.w = nil, nil
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // releases the flock
		s.lock = nil
	}
	return errors.Join(errs...)
}

// Backend names the database in use: "sqlite" or "postgres".
func (s *Store) Backend() string { return s.d.name }

// CacheStats reports effective-document cache hits and misses so far.
func (s *Store) CacheStats() (hits, misses int64) {
	if s.cache == nil {
		return 0, 0
	}
	return s.cache.stats()
}

// migrate applies the embedded migrations that the database lacks, in one
// transaction, under a lock, so bridges starting together do it once.
func (s *Store) migrate(ctx context.Context) error {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return s.write(ctx, func(t *txn) error {
		if s.d.name == postgresDialect.name {
			if _, err := t.exec(`SELECT pg_advisory_xact_lock(7305614902)`); err != nil {
				return err
			}
		}
		if _, err := t.exec(`CREATE TABLE IF NOT EXISTS configdb_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
			return err
		}
		var current int
		if err := t.queryRow(`SELECT COALESCE(MAX(version), 0) FROM configdb_schema`).Scan(&current); err != nil {
			return err
		}
		for i, name := range names {
			version := i + 1
			if version <= current {
				continue
			}
			script, err := migrations.ReadFile("migrations/" + name)
			if err != nil {
				return err
			}
			for _, stmt := range splitStatements(strings.ReplaceAll(string(script), "{{AUTO_ID}}", s.d.autoID)) {
				if _, err := t.tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migration %s: %w", name, err)
				}
			}
			if _, err := t.exec(`INSERT INTO configdb_schema (version, applied_at) VALUES (?, ?)`, version, s.opts.Now().Unix()); err != nil {
				return err
			}
		}
		return nil
	})
}

// splitStatements splits a migration at the semicolons that end lines, and
// drops comment lines. Our migrations keep to that shape.
func splitStatements(script string) []string {
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		stmts = append(stmts, cur.String())
	}
	return stmts
}

// txn is a transaction with the dialect's placeholders applied.
type txn struct {
	ctx context.Context
	tx  *sql.Tx
	d   dialect
	now time.Time

	// What the transaction locked, whose epochs go up once it commits.
	envs    []int64
	catalog bool
}

func (t *txn) exec(query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(t.ctx, t.d.q(query), args...)
}

func (t *txn) query(query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(t.ctx, t.d.q(query), args...)
}

func (t *txn) queryRow(query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.ctx, t.d.q(query), args...)
}

// queryAll runs a query and returns what scan makes of each row, an empty
// list (not nil) when there are none: lists reach the API as [], not null.
// The rows are closed before it returns, so the caller may query again.
func queryAll[T any](t *txn, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ids runs a query for one integer column.
func (t *txn) ids(query string, args ...any) ([]int64, error) {
	return queryAll(t, func(rows *sql.Rows) (int64, error) {
		var id int64
		err := rows.Scan(&id)
		return id, err
	}, query, args...)
}

// write runs fn in a read-write transaction and commits it when fn returns
// nil. For SQLite the transaction holds the write lock from its start.
func (s *Store) write(ctx context.Context, fn func(*txn) error) error {
	if s.w == nil {
		return errors.New("configdb: the store is closed")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("configdb: begin: %w", err)
	}
	t := &txn{ctx: ctx, tx: tx, d: s.d, now: s.opts.Now()}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return s.mapErr(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("configdb: commit: %w", err)
	}
	// After the commit, never before: a merge cached meanwhile carries the
	// old epoch and is dropped at its next use.
	if t.catalog {
		s.catalogEpoch.Add(1)
	}
	for _, env := range t.envs {
		s.envEpoch(env).Add(1)
	}
	return nil
}

func (s *Store) envEpoch(env int64) *atomic.Int64 {
	if e, ok := s.envEpochs.Load(env); ok {
		return e.(*atomic.Int64)
	}
	e, _ := s.envEpochs.LoadOrStore(env, new(atomic.Int64))
	return e.(*atomic.Int64)
}

// read runs fn in a read-only transaction, which sees one snapshot.
func (s *Store) read(ctx context.Context, fn func(*txn) error) error {
	if s.r == nil {
		return errors.New("configdb: the store is closed")
	}
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d.name == postgresDialect.name {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.r.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("configdb: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return s.mapErr(fn(&txn{ctx: ctx, tx: tx, d: s.d, now: s.opts.Now()}))
}

// readValue runs fn in a read-only transaction and returns its result.
func readValue[T any](ctx context.Context, s *Store, fn func(*txn) (T, error)) (T, error) {
	var v T
	err := s.read(ctx, func(t *txn) (err error) {
		v, err = fn(t)
		return err
	})
	return v, err
}

// mapErr turns constraint violations that a concurrent writer can cause into
// Conflicts; other errors pass through.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil || KindOf(err) != 0:
		return err
	case s.d.isUnique(err):
		return &Error{Kind: Conflict, Msg: "a concurrent change conflicts with this one; retry: " + err.Error()}
	case s.d.isForeignKey(err):
		return &Error{Kind: Conflict, Msg: "an object this change refers to was deleted meanwhile; retry: " + err.Error()}
	}
	return fmt.Errorf("configdb: %w", err)
}

// nextCounter returns the value of a configdb_meta counter and advances it.
func (t *txn) nextCounter(name string) (int64, error) {
	var v int64
	if err := t.queryRow(`UPDATE configdb_meta SET value = value + 1 WHERE name = ? RETURNING value - 1`, name).Scan(&v); err != nil {
		return 0, err
	}
	return v, nil
}

// raiseCounter makes sure a counter will not hand out used, which was given
// explicitly.
func (t *txn) raiseCounter(name string, used int64) error {
	_, err := t.exec(`UPDATE configdb_meta SET value = ? WHERE name = ? AND value <= ?`, used+1, name, used)
	return err
}

// lockCatalog serialises writes to components and resource definitions
// (PostgreSQL takes the row lock; SQLite has one writer anyway) and
// invalidates every cached merge.
func (t *txn) lockCatalog() error {
	t.catalog = true
	_, err := t.exec(`UPDATE configdb_meta SET value = value + 1 WHERE name = 'catalog_generation'`)
	return err
}

// lockEnv serialises writes to one environment and invalidates its cached
// merges. A missing environment is NotFound.
func (t *txn) lockEnv(env int64) error {
	t.envs = append(t.envs, env)
	res, err := t.exec(`UPDATE environments SET generation = ? WHERE id = ?`, newGeneration(), env)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return envNotFound(env)
	}
	return nil
}

// newGeneration is random rather than counted, so that an environment deleted
// and created again never matches a merge cached before.
func newGeneration() int64 { return mrand.Int64() }

func envNotFound(env int64) error {
	return errorf(NotFound, "environment not found by identifier: %d", env)
}

// emit records an event in the outbox, in the transaction of its change.
func (t *txn) emit(topic string, payload []byte) error {
	var id [16]byte
	_, _ = rand.Read(id[:])
	_, err := t.exec(`INSERT INTO outbox (msg_id, topic, payload, created_at) VALUES (?, ?, ?, ?)`,
		"configdb-"+hex.EncodeToString(id[:]), topic, string(payload), t.now.UnixNano())
	return err
}

// Pending returns up to limit events from the outbox, oldest first.
func (s *Store) Pending(ctx context.Context, limit int) ([]Event, error) {
	if s.r == nil {
		return nil, errors.New("configdb: the store is closed")
	}
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT id, msg_id, topic, payload, created_at FROM outbox ORDER BY id LIMIT ?`), limit)
	if err != nil {
		return nil, fmt.Errorf("configdb: reading the outbox: %w", err)
	}
	defer rows.Close()
	var events []Event
	for rows.Next() {
		var e Event
		var payload string
		var at int64
		if err := rows.Scan(&e.Seq, &e.ID, &e.Topic, &payload, &at); err != nil {
			return nil, fmt.Errorf("configdb: reading the outbox: %w", err)
		}
		e.Payload, e.Time = []byte(payload), time.Unix(0, at)
		events = append(events, e)
	}
	return events, rows.Err()
}

// Delete removes published events from the outbox.
func (s *Store) Delete(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	args := make([]any, len(events))
	for i, e := range events {
		args[i] = e.Seq
	}
	return s.write(ctx, func(t *txn) error {
		_, err := t.exec(`DELETE FROM outbox WHERE id IN (`+placeholders(len(args))+`)`, args...)
		return err
	})
}

// PendingCount is the number of events in the outbox.
func (s *Store) PendingCount(ctx context.Context) (int, error) {
	if s.r == nil {
		return 0, errors.New("configdb: the store is closed")
	}
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n)
	return n, err
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
