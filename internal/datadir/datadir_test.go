package datadir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestASecondHolderIsToldWhoHoldsTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	want := fmt.Sprintf("another bridge uses the data directory %s (pid %d); set data_dir or FIREHOSE_DATA_DIR to give this bridge its own", dir, os.Getpid())
	if !errors.Is(err, ErrInUse) || err.Error() != want {
		t.Fatalf("second Acquire: %v, want %q", err, want)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	again, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	_ = again.Close(context.Background())
}

func TestAnUnusableDirectoryNamesTheSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Acquire(filepath.Join(file, "data"))
	if err == nil || errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "FIREHOSE_DATA_DIR") {
		t.Fatalf("Acquire under a file: %v", err)
	}
}
