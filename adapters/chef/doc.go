// Package chef is the Chef data collector endpoint: chef-client's
// data_collector.server_url, or Chef Infra Server's data_collector root_url,
// pointed at the bridge. It authenticates, parses with payloads/chef, builds
// topics with topics, applies the configured attribute allow and block lists
// and redaction to converge messages, and publishes every message a request
// produces in one Publish call, answering 2xx only once they are safe.
//
// It must not make topics by hand, talk to a broker directly, or log message
// bodies above debug.
package chef
