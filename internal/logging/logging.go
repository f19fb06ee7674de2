// Package logging builds the process's zerolog logger from the `log:` config
// section. Libraries never create loggers of their own: they receive a child
// of this one.
package logging

import (
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Formats.
const (
	FormatAuto    = "auto"    // console on a terminal, JSON otherwise
	FormatJSON    = "json"    // one JSON object per line
	FormatConsole = "console" // human-readable, coloured on a terminal
)

// Config is the `log:` section.
type Config struct {
	// Level is trace, debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is auto, json or console.
	Format string `yaml:"format"`
}

// DefaultConfig logs at info, as JSON unless stderr is a terminal.
func DefaultConfig() Config { return Config{Level: "info", Format: FormatAuto} }

// Validate checks the level and format names.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if _, err := zerolog.ParseLevel(c.Level); err != nil || c.Level == "" {
		p.Add("level", "%q is not a level; use trace, debug, info, warn or error", c.Level)
	}
	switch c.Format {
	case FormatAuto, FormatJSON, FormatConsole:
	default:
		p.Add("format", "%q is not a format; use auto, json or console", c.Format)
	}
	return p.Err()
}

// New returns a logger writing to w. An invalid level falls back to info,
// because Validate has already reported it.
func New(cfg Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil || cfg.Level == "" {
		level = zerolog.InfoLevel
	}
	terminal := isTerminal(w)
	if cfg.Format == FormatConsole || (cfg.Format != FormatJSON && terminal) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !terminal}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// Pebble adapts a logger to pebble's Logger interface (the broker's store and
// the outbox both use pebble): its chatter goes to debug, its errors to error,
// and its fatal path stays fatal, as pebble expects.
type Pebble struct{ Log zerolog.Logger }

// Infof logs at debug.
func (l Pebble) Infof(format string, args ...any) { l.Log.Debug().Msgf(format, args...) }

// Errorf logs at error.
func (l Pebble) Errorf(format string, args ...any) { l.Log.Error().Msgf(format, args...) }

// Fatalf logs and exits.
func (l Pebble) Fatalf(format string, args ...any) { l.Log.Fatal().Msgf(format, args...) }
