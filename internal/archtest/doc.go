// Package archtest holds the architecture test: it reads the rules of every
// package's doc comment (each clause that says what the package may not do)
// and holds those about dependencies against what the package imports (go
// list -deps), so that the rules the docs state cannot drift from the code.
// It has no code of its own, and nothing imports it.
package archtest
