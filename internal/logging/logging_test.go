package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestFormats(t *testing.T) {
	var buf bytes.Buffer
	log := New(Config{Level: "info", Format: FormatAuto}, &buf)
	log.Info().Str("k", "v").Msg("hello")
	if !strings.HasPrefix(buf.String(), `{"level":"info","k":"v"`) {
		t.Errorf("auto on a non-terminal should be JSON: %q", buf.String())
	}
	buf.Reset()
	log = New(Config{Level: "info", Format: FormatConsole}, &buf)
	log.Info().Msg("hello")
	if strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), "hello") {
		t.Errorf("console format: %q", buf.String())
	}
	buf.Reset()
	log = New(Config{Level: "warn", Format: FormatJSON}, &buf)
	log.Info().Msg("hidden")
	if buf.Len() != 0 {
		t.Errorf("info logged at warn level: %q", buf.String())
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{Level: "loud", Format: FormatJSON}, {Level: "info", Format: "xml"}, {Level: "", Format: FormatJSON}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if c := DefaultConfig(); c.Validate() != nil {
		t.Error("defaults rejected")
	}
}
