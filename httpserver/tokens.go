package httpserver

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Tokens checks presented tokens against the configured ones in constant time.
// The zero value accepts nothing; an empty Tokens means authentication is off,
// which the caller decides with Required.
type Tokens struct {
	names   []string
	digests [][32]byte
}

// NewTokens prepares the configured tokens for checking.
func NewTokens(tokens []Token) *Tokens {
	t := &Tokens{}
	for _, tok := range tokens {
		t.names = append(t.names, tok.Name)
		t.digests = append(t.digests, sha256.Sum256([]byte(tok.Token)))
	}
	return t
}

// Required reports whether any token is configured.
func (t *Tokens) Required() bool { return len(t.digests) > 0 }

// Check reports whether presented is one of the tokens, and that token's name.
// Comparing fixed-size digests, and always comparing against every token,
// keeps the time independent of how much of a token matched and of which one.
func (t *Tokens) Check(presented string) (name string, ok bool) {
	d := sha256.Sum256([]byte(presented))
	match := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", false
	}
	return t.names[match], true
}
