// Package brokeronly is cmd/broker, the broker alone, in one package: its
// command line (cli.go, Broker, over the core it shares with the bridge in
// cli/clicore), its config file (config.go: the bridge's file read for the
// sections the broker runs, the bridge's other sections accepted unchecked
// and named by BridgeOnly, so one file serves both binaries) and its
// application (brokeronly.go: the broker with its health, readiness and
// metrics endpoints).
//
// It must not import the adapters, the sinks, the router or a store: their
// configs pull in SQLite, pgx, NATS and JSON Schema, which cmd/broker must
// not link (cmd/broker/deps_test.go). It is apart from package app, which
// runs the bridge, for that reason.
package brokeronly
