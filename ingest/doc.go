// Package ingest is `bridge ingest`: small relays for sources that cannot
// post to the bridge themselves. `bridge ingest gerrit` runs `gerrit
// stream-events` (over ssh) and posts its events to /gerrit/v1/events;
// `bridge ingest launchpad` posts one mail from an MTA pipe to
// /launchpad/v1/events. Both talk to a running bridge over HTTP, like any
// other client, with a token.
//
// It must not parse more than it needs to keep bad lines out of a batch: the
// bridge is the authority on what it accepts.
package ingest
