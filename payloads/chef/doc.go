// Package chef holds the Chef data collector's message types, their
// classification (in Chef Automate's order) and their validation against the
// RFC's draft-04 JSON schemas, which are embedded (schemas/strict: the RFC
// verbatim; schemas/compatible: widened by what real senders send).
//
// It parses a body once, without decoding the big parts (the node object,
// resource states), and returns what topics and derived messages need, with
// spans into the body so that callers can pass the original bytes through,
// and the problems that do not stop a message being published as Warnings.
// It computes compliance verdicts and counts exactly as Chef Automate does
// (ComplianceSummary). It never modifies a body, publishes nothing, and
// knows nothing of topics.
//
// It also declares the payloads the bridge derives from Chef's messages
// (published.go: a node's retained Summary, TeamFailure, RolloutEvent,
// CookbookTally), which the Chef adapter builds and consumers such as the
// dashboard decode: each has this one declaration.
package chef
