package configcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Environment variables the commands read; flags override them.
const (
	EnvURL       = "FIREHOSE_CONFIGDB_URL"      // the API, e.g. http://127.0.0.1:8080/api/v1/config
	EnvBridgeURL = "FIREHOSE_URL"               // the bridge, e.g. http://127.0.0.1:8080; /api/v1/config is added
	EnvToken     = "FIREHOSE_CONFIGDB_TOKEN"    // sent as X-Auth-Token
	EnvUser      = "FIREHOSE_CONFIGDB_USER"     // HTTP Basic user, with EnvPassword
	EnvPassword  = "FIREHOSE_CONFIGDB_PASSWORD" // HTTP Basic password
)

// DefaultURL is the API of a bridge running with its defaults.
const DefaultURL = "http://127.0.0.1:8080/api/v1/config"

// client speaks to the API.
type client struct {
	base     string
	token    string
	user     string
	password string
	http     *http.Client
}

// apiError is a 4xx or 5xx answer.
type apiError struct {
	method, path string
	status       int
	msg          string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.method, e.path, e.status, http.StatusText(e.status), e.msg)
}

// reply is a 2xx answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body nil sends none, []byte is sent as is, anything
// else as JSON. Any answer but 2xx is an *apiError with the server's message.
func (c *client) do(ctx context.Context, method, path string, body any, headers ...string) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Accept", "application/json")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	} else if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return reply{}, &apiError{method: method, path: path, status: resp.StatusCode, msg: errorMessage(b)}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// errorMessage reads {"msg": ...} (ConfigDB), {"error": ...} (the rest of
// the bridge), or shows the body as it is.
func errorMessage(body []byte) string {
	var e struct{ Msg, Error string }
	if json.Unmarshal(body, &e) == nil {
		if e.Msg != "" {
			return e.Msg
		}
		if e.Error != "" {
			return e.Error
		}
	}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(no message)"
	}
	return s
}

func newClient(base, token, user, password string) *client {
	return &client{base: strings.TrimSuffix(base, "/"), token: token, user: user, password: password,
		http: &http.Client{Timeout: 60 * time.Second}}
}
