package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Keystone validates tokens against Keystone's identity v3 API:
// GET /v3/auth/tokens with the token in X-Subject-Token. Valid tokens are
// cached for CacheTTL, never beyond their expiry.
type Keystone struct {
	url          string
	serviceToken string
	writer       map[string]bool
	reader       map[string]bool
	ttl          time.Duration
	client       *http.Client
	now          func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedIdentity
}

type cachedIdentity struct {
	id    Identity
	until time.Time
}

// maxCachedTokens bounds the cache; past it, it starts afresh.
const maxCachedTokens = 10000

// NewKeystone returns a checker for cfg. client nil means a default client
// with cfg.Timeout; now nil means time.Now.
func NewKeystone(cfg KeystoneConfig, client *http.Client, now func() time.Time) *Keystone {
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	if now == nil {
		now = time.Now
	}
	k := &Keystone{
		url:          strings.TrimSuffix(strings.TrimSuffix(cfg.URL, "/"), "/v3") + "/v3/auth/tokens",
		serviceToken: cfg.ServiceToken,
		writer:       map[string]bool{},
		reader:       map[string]bool{},
		ttl:          cfg.CacheTTL,
		client:       client,
		now:          now,
		cache:        map[[32]byte]cachedIdentity{},
	}
	for _, r := range cfg.WriterRoles {
		k.writer[r] = true
	}
	for _, r := range cfg.ReaderRoles {
		k.reader[r] = true
	}
	return k
}

// keystoneToken is the part of Keystone's answer we read.
type keystoneToken struct {
	Token struct {
		ExpiresAt time.Time `json:"expires_at"`
		User      struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			Domain struct {
				Name string `json:"name"`
			} `json:"domain"`
		} `json:"user"`
		Roles []struct {
			Name string `json:"name"`
		} `json:"roles"`
	} `json:"token"`
}

// CheckToken implements TokenChecker.
func (k *Keystone) CheckToken(ctx context.Context, token string) (Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := k.now()
	k.mu.Lock()
	c, ok := k.cache[key]
	k.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.id, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return Identity{}, err
	}
	auth := k.serviceToken
	if auth == "" {
		auth = token // a token may validate itself under Keystone's default policy
	}
	req.Header.Set("X-Auth-Token", auth)
	req.Header.Set("X-Subject-Token", token)
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return Identity{}, fmt.Errorf("keystone: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Identity{}, fmt.Errorf("keystone: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound,
		k.serviceToken == "" && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return Identity{}, ErrInvalidToken
	default:
		return Identity{}, fmt.Errorf("keystone answered %s", resp.Status)
	}
	var t keystoneToken
	if err := json.Unmarshal(body, &t); err != nil {
		return Identity{}, fmt.Errorf("keystone: unreadable token: %w", err)
	}
	if !t.Token.ExpiresAt.IsZero() && !now.Before(t.Token.ExpiresAt) {
		return Identity{}, ErrInvalidToken
	}
	id := Identity{Name: t.Token.User.Name}
	if id.Name == "" {
		id.Name = t.Token.User.ID
	}
	if t.Token.User.Domain.Name != "" && t.Token.User.Domain.Name != "Default" {
		id.Name += "@" + t.Token.User.Domain.Name
	}
	for _, r := range t.Token.Roles {
		switch {
		case k.writer[r.Name]:
			id.Role = RoleWriter
		case k.reader[r.Name] && id.Role == "":
			id.Role = RoleReader
		}
	}
	until := now.Add(k.ttl)
	if !t.Token.ExpiresAt.IsZero() && t.Token.ExpiresAt.Before(until) {
		until = t.Token.ExpiresAt
	}
	k.mu.Lock()
	if len(k.cache) >= maxCachedTokens {
		clear(k.cache)
	}
	k.cache[key] = cachedIdentity{id: id, until: until}
	k.mu.Unlock()
	return id, nil
}
