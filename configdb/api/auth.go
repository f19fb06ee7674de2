package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/credentials"
)

// Identity is who made a request: recorded as the author of changes.
type Identity struct {
	Name string
	// Role is RoleReader or RoleWriter; empty means none, which may do nothing.
	Role string
}

// TokenChecker validates the X-Auth-Token values that are not static tokens,
// such as Keystone tokens. It must be safe for concurrent use.
type TokenChecker interface {
	// CheckToken returns whom the token belongs to. The error wraps
	// ErrInvalidToken when the token is not valid; any other error means the
	// checker could not tell (the request is answered 503, to be retried).
	CheckToken(ctx context.Context, token string) (Identity, error)
}

// ErrInvalidToken is wrapped by TokenChecker errors for tokens that are not
// valid (unknown, expired, revoked).
var ErrInvalidToken = errors.New("invalid token")

// anonymous is who acts when no credentials are configured.
const anonymous = "anonymous"

// authenticator checks a request's credentials: X-Auth-Token (or
// Authorization: Bearer) against the static tokens, then the checker; or
// HTTP Basic against the bcrypt users.
type authenticator struct {
	open   bool
	tokens credentials.Tokens[Identity]
	// shared are http.tokens, accepted as writers when configdb.auth
	// configures nothing: a token set for the whole listener must not leave
	// ConfigDB open.
	shared  *httpserver.Tokens
	users   map[string]Identity
	checker TokenChecker

	// passwords checks HTTP Basic passwords and remembers the last that
	// passed per user: Hiera sends one request per lookup, and bcrypt costs
	// tens of milliseconds each.
	passwords *credentials.Verifier
}

func newAuthenticator(cfg AuthConfig, checker TokenChecker, shared *httpserver.Tokens) *authenticator {
	a := &authenticator{users: map[string]Identity{}, checker: checker}
	for _, t := range cfg.Tokens {
		name := t.Name
		if name == "" {
			name = "token"
		}
		a.tokens.Add(t.Token, Identity{Name: name, Role: t.Role})
	}
	hashes := make(map[string]string, len(cfg.Users))
	for _, u := range cfg.Users {
		a.users[u.Username] = Identity{Name: u.Username, Role: u.Role}
		hashes[u.Username] = u.PasswordHash
	}
	a.passwords = credentials.NewVerifier(hashes)
	if a.tokens.Len() == 0 && len(a.users) == 0 && checker == nil {
		if shared != nil && shared.Required() {
			a.shared = shared
		} else {
			a.open = true
		}
	}
	return a
}

// authFailure is why a request was refused.
type authFailure struct {
	status int
	msg    string
}

// authenticate returns the request's identity, or why it is refused: 401
// without credentials, 403 with wrong ones, 503 when the token checker is
// unavailable.
func (a *authenticator) authenticate(r *http.Request) (Identity, *authFailure) {
	if a.open {
		return Identity{Name: anonymous, Role: RoleWriter}, nil
	}
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		if scheme, rest, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(rest)
		}
	}
	if token != "" {
		return a.checkToken(r.Context(), token)
	}
	if user, password, ok := r.BasicAuth(); ok {
		return a.checkBasic(user, password)
	}
	return Identity{}, &authFailure{http.StatusUnauthorized, "credentials required: send X-Auth-Token, or HTTP Basic"}
}

func (a *authenticator) checkToken(ctx context.Context, token string) (Identity, *authFailure) {
	if id, ok := a.tokens.Check(token); ok {
		return id, nil
	}
	if a.shared != nil {
		if name, ok := a.shared.Check(token); ok {
			if name == "" {
				name = "token"
			}
			return Identity{Name: name, Role: RoleWriter}, nil
		}
	}
	if a.checker == nil {
		return Identity{}, &authFailure{http.StatusForbidden, "invalid token"}
	}
	id, err := a.checker.CheckToken(ctx, token)
	switch {
	case errors.Is(err, ErrInvalidToken):
		return Identity{}, &authFailure{http.StatusForbidden, "invalid token"}
	case err != nil:
		return Identity{}, &authFailure{http.StatusServiceUnavailable, "cannot validate the token now: " + err.Error()}
	}
	return id, nil
}

func (a *authenticator) checkBasic(user, password string) (Identity, *authFailure) {
	// An unknown user costs a bcrypt too, so that timing does not reveal
	// which users exist.
	if !a.passwords.Verify(user, []byte(password)) {
		return Identity{}, &authFailure{http.StatusForbidden, "invalid username or password"}
	}
	return a.users[user], nil
}

// authorize checks the role against the method: readers may only read.
func authorize(id Identity, method string) *authFailure {
	switch {
	case id.Role == RoleWriter:
		return nil
	case id.Role == RoleReader && (method == http.MethodGet || method == http.MethodHead):
		return nil
	case id.Role == RoleReader:
		return &authFailure{http.StatusForbidden, id.Name + " has the reader role, which may only GET"}
	}
	return &authFailure{http.StatusForbidden, id.Name + " has no ConfigDB role"}
}
