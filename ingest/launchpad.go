package ingest

import (
	"context"
	"fmt"
	"io"

	"github.com/opsfirehose/firehose/internal/terminal"
)

// LaunchpadPath is the bridge's endpoint for Launchpad mail.
const LaunchpadPath = "/launchpad/v1/events"

// maxMail bounds what is read from stdin; the bridge's launchpad.max_body
// is the real limit, and answers 413 below it.
const maxMail = 64 << 20

// runLaunchpad posts the mail on stdin. On success it prints one line when
// run by hand (stdout is a terminal) or with --verbose, and nothing from an
// MTA's pipe, which could mail the output back; on failure it says why on
// stderr and exits with a code the MTA understands.
func runLaunchpad(ctx context.Context, args []string, e env) int {
	fs := newFlagSet("launchpad", e)
	var cf clientFlags
	cf.register(fs, e)
	verbose := fs.Bool("verbose", false, "print a line on success (the default when stdout is a terminal)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(e.stderr, "bridge ingest launchpad: "+format+"\n", a...)
		return code
	}
	cl, err := cf.newClient(LaunchpadPath)
	if err != nil {
		// A configuration problem is the operator's to fix: the MTA keeps
		// the mail meanwhile.
		return fail(ExitTempFail, "%v", err)
	}
	mail, err := io.ReadAll(io.LimitReader(e.stdin, maxMail+1))
	if err != nil {
		return fail(ExitTempFail, "reading the mail from stdin: %v", err)
	}
	if len(mail) > maxMail {
		return fail(ExitDataErr, "the mail is over %d MiB", maxMail>>20)
	}
	a, err := cl.post(ctx, "message/rfc822", mail)
	switch {
	case err != nil:
		return fail(ExitTempFail, "the bridge at %s is unreachable, retry later: %v", cl.endpoint, err)
	case a.ok():
		if *verbose || terminal.Is(e.stdout) {
			where := ""
			if a.topic != "" {
				where = " on " + a.topic
			}
			fmt.Fprintf(e.stdout, "bridge ingest launchpad: the bridge at %s published the mail%s\n", cl.endpoint, where)
		}
		return ExitOK
	case a.refused():
		return fail(ExitDataErr, "the bridge refused the mail (HTTP %d): %s", a.code, a.message)
	default:
		// 401/403 (a token to fix), 404 (launchpad disabled), 429/503 (busy
		// or a sink down) and 5xx: nothing is wrong with the mail.
		return fail(ExitTempFail, "the bridge did not take the mail, retry later (HTTP %d): %s", a.code, a.message)
	}
}
