// Package configdb is ConfigDB's domain and storage: components and their
// resource definitions, environments with their hierarchy levels, and the
// values and overrides documents stored per environment, resource and level
// path, with every version kept.
//
// It runs on database/sql with one schema and two drivers: SQLite
// (modernc.org/sqlite, a file under the data directory, the default) and
// PostgreSQL (pgx, for postgres:// DSNs). Migrations are embedded and run by
// Open. Every write is one transaction, and every write that changes
// something records its event in the outbox table of the same transaction,
// so an event is never lost even if publishing it fails: the caller drains
// the outbox with Pending and Delete.
//
// Effective values (the shallow merge of every level's values and overrides)
// are cached, and each cache entry is checked against generation counters in
// the database, so several bridges sharing one PostgreSQL never serve stale
// merges.
//
// It must not know about HTTP, authentication or the bus: configdb/api
// is the API, and it publishes what the outbox holds.
package configdb
