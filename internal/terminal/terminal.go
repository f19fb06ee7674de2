// Package terminal tells whether output goes to a person: commands print
// tables and confirmations there, and stay terse in pipes and scripts.
package terminal

import (
	"io"
	"os"
)

// Is reports whether w is a terminal (a character device).
func Is(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
