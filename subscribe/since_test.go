package subscribe

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBadSinceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--since", "yesterday"}, "--since \"yesterday\": give a duration back from now"},
		{[]string{"--until", "1h"}, "--until needs --since"},
		{[]string{"--since", "2h", "--retained-only"}, "has no retained flag"},
		{[]string{"--since", "2h", "--http-url", "tcp://x:1"}, "not the bridge's HTTP URL"},
	} {
		var out, errOut bytes.Buffer
		if code := Run(context.Background(), c.args, &out, &errOut, nil); code != ExitUsage || !strings.Contains(errOut.String(), c.says) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errOut.String())
		}
	}
}
