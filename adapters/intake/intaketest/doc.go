// Package intaketest is what intake adapters' tests share, as sinks/sinktest
// is for sinks: the adapter behind a real HTTP server, a POST that returns
// what a sender sees, and golden files of what it published.
//
// Its Suite is the golden-fixture suite every intake adapter runs from its
// TestGolden. It must not be imported outside tests.
package intaketest
