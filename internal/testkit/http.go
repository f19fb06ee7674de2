package testkit

import (
	"io"
	"net/http"
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
