package credentials

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Tokens checks presented tokens against configured ones, each with what it
// stands for (a name, an identity). The zero value accepts nothing; whether an
// empty Tokens means authentication is off is the caller's decision (Len).
// It must not be changed after the first Check.
type Tokens[T any] struct {
	digests [][32]byte
	ids     []T
}

// Add configures token, which stands for id.
func (t *Tokens[T]) Add(token string, id T) {
	t.digests = append(t.digests, sha256.Sum256([]byte(token)))
	t.ids = append(t.ids, id)
}

// Len is how many tokens are configured.
func (t *Tokens[T]) Len() int { return len(t.digests) }

// Check reports whether presented is one of the tokens, and what it stands
// for (the last one configured, if a token is given twice). Comparing
// fixed-size digests, and always comparing against every token, keeps the
// time independent of how much of a token matched and of which one.
func (t *Tokens[T]) Check(presented string) (id T, ok bool) {
	d := sha256.Sum256([]byte(presented))
	match := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return id, false
	}
	return t.ids[match], true
}
