// Package payloads holds the message types of each source and their
// validation (the Chef data-collector schemas, the firehose Ansible schema,
// Gerrit stream events, Launchpad notifications, subunit results), one
// subpackage per source. It parses and validates; it does not publish, and it
// never changes a payload that is passed through.
//
// payloads/<source> is the schema that Go consumers of the bus import to
// decode the messages they receive: a message's payload is the source's own
// JSON, as the bridge accepted it, so the parser that validated it at intake
// is the one that decodes it at the other end. That is why these packages
// stay apart from adapters/, which receive, route and publish: a consumer
// imports payloads/ansible without pulling in HTTP handlers, metrics or the
// bus. See the package example for a consumer.
package payloads
