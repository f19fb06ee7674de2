// Package terminal tells whether output goes to a person: commands print
// tables and confirmations there, and stay terse in pipes and scripts. It
// also reads a secret typed at a terminal without showing it.
//
// It must not print anything itself: prompts are the command's.
package terminal
