package httpserver

import "github.com/opsfirehose/firehose/internal/credentials"

// Tokens checks presented tokens against the configured ones in constant time
// (credentials.Tokens). The zero value accepts nothing; an empty Tokens means
// authentication is off, which the caller decides with Required.
type Tokens struct {
	tokens credentials.Tokens[string] // by name
}

// NewTokens prepares the configured tokens for checking.
func NewTokens(tokens []Token) *Tokens {
	t := &Tokens{}
	for _, tok := range tokens {
		t.tokens.Add(tok.Token, tok.Name)
	}
	return t
}

// Required reports whether any token is configured.
func (t *Tokens) Required() bool { return t.tokens.Len() > 0 }

// Check reports whether presented is one of the tokens, and that token's name.
func (t *Tokens) Check(presented string) (name string, ok bool) { return t.tokens.Check(presented) }
