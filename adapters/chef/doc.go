// Package chef is the Chef data collector endpoint: chef-client's
// data_collector.server_url, or Chef Infra Server's data_collector root_url,
// pointed at the bridge, on adapters/intake's Base like every source (which
// authenticates, reads the body, and answers, logs and counts refusals and
// publishes). It parses with payloads/chef, builds
// topics with topics, applies the configured attribute allow and block lists
// and redaction to converge messages, and publishes every message a request
// produces in one Publish call, answering 2xx only once they are safe.
//
// It also tells teams what is theirs (owners.go: cookbooks owned by name,
// pattern or Policyfile lock; a failure to the team whose cookbook failed)
// and follows each cookbook's rollout (rollout.go: each node's versions in
// a pebble store in the data directory, rollout events, retained tallies).
// That state is the adapter's only state; Start and Close look after it.
//
// It must not make topics by hand, talk to a broker directly, or log message
// bodies above debug.
package chef
