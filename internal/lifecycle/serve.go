package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Serve is the rest of a program's Run once its parts have started: it waits
// until ctx is done (a signal) or httpErr reports that the HTTP listener
// failed, then calls closeAll with a context of its own, bounded by timeout,
// since ctx may be done already. It returns the listener's error, if any,
// joined with closeAll's.
func Serve(ctx context.Context, log zerolog.Logger, httpErr <-chan error, timeout time.Duration, closeAll func(context.Context) error) error {
	var runErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case err := <-httpErr:
		runErr = fmt.Errorf("http listener: %w", err)
		log.Error().Err(err).Msg("HTTP listener failed; shutting down")
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return errors.Join(runErr, closeAll(sctx))
}
