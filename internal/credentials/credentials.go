// Package credentials is the project's one copy of its security checks:
// passwords against bcrypt hashes with a cache of verified passwords, static
// tokens compared in constant time, and the config checks of a user's
// username and password hash. The broker's MQTT logins, the ConfigDB API's
// HTTP Basic and tokens, and the HTTP intake's tokens all use it.
//
// It decides whether a secret matches, and nothing else: throttling
// guessers, answering the client and logging belong to the caller (the
// broker's login throttle, for one, wraps Verifier.Compare).
package credentials

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/strictyaml"
)

// Verifier checks passwords against the bcrypt hashes of a fixed set of
// users. It remembers a salted SHA-256 digest of the last password that
// passed bcrypt for each user, so that a reconnect storm, or a Hiera lookup
// per request, costs one bcrypt rather than one each, and a user whose
// password is known gets in while guessers wait their turn. The cache holds
// at most one digest per configured user: a password is remembered only when
// it matched a configured hash. It is safe for concurrent use.
type Verifier struct {
	hashes map[string][]byte
	salt   [16]byte

	mu       sync.Mutex
	verified map[string][32]byte
}

// NewVerifier returns a Verifier for the users' bcrypt hashes, by username.
// Changing users takes a new Verifier.
func NewVerifier(hashes map[string]string) *Verifier {
	v := &Verifier{hashes: make(map[string][]byte, len(hashes)), verified: make(map[string][32]byte, len(hashes))}
	for user, h := range hashes {
		v.hashes[user] = []byte(h)
	}
	_, _ = rand.Read(v.salt[:])
	return v
}

// Verify reports whether password is user's: Known, or else Compare.
func (v *Verifier) Verify(user string, password []byte) bool {
	return v.Known(user, password) || v.Compare(user, password)
}

// Known reports, without bcrypt, whether password is the last one that
// passed Compare for user. The digests are compared in constant time.
func (v *Verifier) Known(user string, password []byte) bool {
	digest := v.digest(password)
	v.mu.Lock()
	known, ok := v.verified[user]
	v.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(known[:], digest[:]) == 1
}

// Compare runs bcrypt: it reports whether password matches user's hash, and
// remembers it for Known when it does. For a user that does not exist it
// compares against a hash of the default cost, so that the time taken does
// not reveal which users exist, and reports false.
func (v *Verifier) Compare(user string, password []byte) bool {
	hash, ok := v.hashes[user]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(dummyHash, password)
		return false
	}
	if bcrypt.CompareHashAndPassword(hash, password) != nil {
		return false
	}
	digest := v.digest(password)
	v.mu.Lock()
	v.verified[user] = digest
	v.mu.Unlock()
	return true
}

func (v *Verifier) digest(password []byte) [32]byte {
	d := sha256.New()
	d.Write(v.salt[:])
	d.Write(password)
	var sum [32]byte
	d.Sum(sum[:0])
	return sum
}

// dummyHash is a bcrypt hash (cost 10, the default, and `bridge passwd`'s)
// of a password nobody knows.
var dummyHash = []byte("$2a$10$57brKkbEvBvIkR7ea38DT.BjrnQGqtoAoyBDOlqAoGP5Su.3XWT36")

// DefaultCost is the bcrypt cost `bridge passwd` uses unless told otherwise,
// and the dummy hash's.
const DefaultCost = bcrypt.DefaultCost

// Hash returns the bcrypt hash of password at cost, for config files.
func Hash(password []byte, cost int) ([]byte, error) {
	return bcrypt.GenerateFromPassword(password, cost)
}

// ValidateUser adds the problems of a configured user's login to p, under
// the keys "username" and "password_hash".
func ValidateUser(p *strictyaml.Problems, username, passwordHash string) {
	if username == "" {
		p.Add("username", "required")
	}
	if passwordHash == "" {
		p.Add("password_hash", "required; make one with `bridge passwd`")
	} else if _, err := bcrypt.Cost([]byte(passwordHash)); err != nil {
		p.Add("password_hash", "not a bcrypt hash (%v); make one with `bridge passwd`", err)
	}
}
