// Package cliflag is how the bridge's subcommands read their flags: one
// error-returning flag set per subcommand, its messages on the command's
// stderr, no positional arguments.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// NewFlagSet returns a ContinueOnError flag set named name (the command as
// the user typed it, for messages) that prints to out.
func NewFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			fmt.Fprintf(fs.Output(), "%s takes no flags.\n", name)
			return
		}
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args, and reports whether to go on and, if not, the exit
// code: 0 for -h (the usage is printed), usage for a bad flag or an
// argument that is not a flag (the problem is printed).
func Parse(fs *flag.FlagSet, args []string, usage int) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return usage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return usage, false
	}
	return 0, true
}
