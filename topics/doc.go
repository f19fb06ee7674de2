// Package topics is the only place where firehose makes MQTT topics and NATS
// subjects.
//
// It is for:
//
//   - escaping values that come from input data (a node name, a hostname, a
//     ConfigDB resource) so that each one stays a single, reversible topic
//     level whatever it contains ([Escape], [Unescape]);
//   - building the topics of the DESIGN.md topic table with typed builders,
//     one struct per source ([Chef], [Ansible], [ConfigDB], [Gerrit],
//     [Launchpad], [Subunit]), each with a configurable prefix;
//   - checking MQTT topic names and filters, and matching filters against
//     names and against each other ([ValidName], [ValidFilter], [Match],
//     [Overlap]), for ACLs and routes;
//   - mapping topics to NATS subjects and back, the way nats-server's own
//     MQTT support does, plus a percent layer for what nats-server rejects
//     ([ToSubject], [FromSubject], [FilterToSubject]; [SubjectOf] for a topic
//     checked already);
//   - reading a topic back into its levels, for consumers ([Parse]).
//
// It must not:
//
//   - do I/O, log, or hold state: every function is pure and safe for
//     concurrent use, and there is no package-level mutable state;
//   - depend on anything outside the standard library, so that every other
//     package can import it;
//   - be bypassed: other packages must not assemble topics with fmt.Sprintf or
//     string concatenation, because then escaping and length limits are lost
//     and a hostname like "web/01" silently adds a level to the tree.
//
// Builders return errors of type [*LevelError], which names the offending
// input field so that an HTTP adapter can answer 400 with that field.
package topics
