// Package payloads holds the message types of each source and their
// validation (the Chef data-collector schemas, the firehose Ansible schema,
// ...), one subpackage per source. It parses and validates; it does not
// publish, and it never changes a payload that is passed through.
package payloads
