package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// bigConverge grows fixture's node.automatic with synthetic Ohai package
// entries until the body is at least size bytes: a converge from a node with
// a big Ohai tree, as the fixtures README describes (over 3 MB in the field).
func bigConverge(fixture []byte, size int) ([]byte, error) {
	node, ok := jsonscan.Get(fixture, "node")
	if !ok {
		return nil, errors.New("the fixture has no node")
	}
	auto, ok := jsonscan.Get(node, "automatic")
	if !ok || jsonscan.Kind(auto) != jsonscan.Object {
		return nil, errors.New("the fixture has no node.automatic")
	}
	// auto aliases fixture, so their capacities give its offset; its first
	// byte is the object's '{'.
	at := cap(fixture) - cap(auto) + 1
	if at <= 0 || fixture[at-1] != '{' {
		return nil, errors.New("cannot locate node.automatic")
	}
	var grow []byte
	grow = append(grow, `"bench_packages":{`...)
	for i := 0; len(fixture)+len(grow) < size; i++ {
		if i > 0 {
			grow = append(grow, ',')
		}
		grow = fmt.Appendf(grow, `"pkg-%07d":{"version":"%d.%d.%d-1ubuntu1","arch":"amd64","source":"pkg-src-%d",`+
			`"status":"installed","description":"synthetic Ohai package entry that bench/chef adds to grow the node object"}`,
			i, i%7, i%13, i%101, i/3)
	}
	grow = append(grow, "},"...)
	out := make([]byte, 0, len(fixture)+len(grow))
	out = append(append(append(out, fixture[:at]...), grow...), fixture[at:]...)
	if !jsonscan.Valid(out) {
		return nil, errors.New("the grown converge is not valid JSON")
	}
	return out, nil
}

// fixturePath resolves path against the module root, so that the benchmark
// runs from any directory of the repository.
func fixturePath(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	dir, err := os.Getwd()
	if err != nil {
		return path
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, path)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		dir = parent
	}
}

func httpClient() *http.Client { return &http.Client{Timeout: 60 * time.Second} }
