package lifecycle

import (
	"context"
	"errors"
	"fmt"
)

// Part is one component of a program and the name its errors carry.
type Part struct {
	Name string
	C    Component
}

// Parts is a list of parts in the order they close.
type Parts []Part

// Add appends c unless it is absent (a nil pointer inside c would not be).
func (ps *Parts) Add(present bool, name string, c Component) {
	if present {
		*ps = append(*ps, Part{name, c})
	}
}

// CloseAll closes each part in turn, each within what is left of ctx, and
// reports every failure.
func CloseAll(ctx context.Context, ps Parts) error {
	var errs []error
	for _, p := range ps {
		if err := Within(ctx, func() error { return p.C.Close(ctx) }); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Within runs fn, giving up when ctx is done, so one stuck component cannot
// hold shutdown past its deadline.
func Within(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("gave up waiting: %w", ctx.Err())
	}
}
