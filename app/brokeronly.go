package app

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config"
)

// RunBroker runs the broker alone, from the same `broker:` section the bridge
// uses: the replacement for the OpenStack firehose's mosquitto. It returns
// after ctx is done and the broker has closed, within shutdown_timeout.
func RunBroker(ctx context.Context, cfg config.Config, log zerolog.Logger) error {
	b, err := broker.New(cfg.Broker, broker.Options{Logger: log})
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		return err
	}
	log.Info().Msg("broker ready")
	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := within(sctx, b.Close); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}

// within runs fn, giving up when ctx is done, so one stuck component cannot
// hold shutdown past its deadline.
func within(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("gave up waiting: %w", ctx.Err())
	}
}
