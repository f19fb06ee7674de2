package testkit

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Do sends req with client (nil: http.DefaultClient) and returns the
// response with its body read whole and closed, failing the test when the
// request or the read fails.
func Do(t testing.TB, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// Get GETs url and returns the status and the body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := Do(t, nil, req)
	return resp.StatusCode, string(body)
}

// EventuallyContains waits until a GET of url answers with a body holding
// every one of wants: for /metrics, whose counters move after the delivery
// or the answer that a test has already seen.
func EventuallyContains(t testing.TB, url string, wants ...string) {
	t.Helper()
	Eventually(t, func() bool {
		_, body := Get(t, url)
		for _, want := range wants {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	}, "%s to have all of %q", url, wants)
}
