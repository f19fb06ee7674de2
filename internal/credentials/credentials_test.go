package credentials

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/strictyaml"
)

func hash(t testing.TB, password string) string {
	t.Helper()
	h, err := Hash([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestVerifier(t *testing.T) {
	v := NewVerifier(map[string]string{"alice": hash(t, "secret"), "bob": hash(t, "hunter2")})
	if v.Known("alice", []byte("secret")) {
		t.Fatal("a password is known before it passed bcrypt")
	}
	tests := []struct {
		user, password string
		ok             bool
	}{
		{"alice", "secret", true},
		{"alice", "Secret", false},
		{"alice", "", false},
		{"alice", "hunter2", false}, // bob's
		{"bob", "hunter2", true},
		{"mallory", "secret", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := v.Verify(tt.user, []byte(tt.password)); got != tt.ok {
			t.Errorf("Verify(%q, %q) = %v, want %v", tt.user, tt.password, got, tt.ok)
		}
	}
	// What passed bcrypt is known now; nothing else is.
	for _, tt := range tests {
		if got := v.Known(tt.user, []byte(tt.password)); got != tt.ok {
			t.Errorf("Known(%q, %q) = %v, want %v", tt.user, tt.password, got, tt.ok)
		}
	}
}

// The cache holds at most one digest per configured user, however many
// users, passwords and guesses it sees.
func TestVerifierCacheBounded(t *testing.T) {
	v := NewVerifier(map[string]string{"alice": hash(t, "secret")})
	for i := range 2 {
		v.Compare(fmt.Sprintf("user%d", i), []byte("secret"))
		v.Compare("alice", []byte(fmt.Sprintf("guess%d", i)))
	}
	v.Compare("alice", []byte("secret"))
	v.Compare("alice", []byte("secret"))
	if n := len(v.verified); n != 1 {
		t.Fatalf("the cache holds %d digests for one user", n)
	}
	if !v.Known("alice", []byte("secret")) || v.Known("alice", []byte("guess1")) {
		t.Fatal("the cache remembers the wrong password")
	}
}

// Each Verifier salts its digests itself, so a digest seen in one process
// (a heap dump, say) says nothing about another's.
func TestVerifierSalted(t *testing.T) {
	a, b := NewVerifier(nil), NewVerifier(nil)
	if a.salt == b.salt || a.digest([]byte("x")) == b.digest([]byte("x")) {
		t.Fatal("two verifiers share a salt")
	}
}

// An unknown user is compared against a hash of bcrypt's default cost, the
// cost `bridge passwd` uses, so it takes as long as a real user's check.
func TestDummyHashCost(t *testing.T) {
	cost, err := bcrypt.Cost(dummyHash)
	if err != nil || cost != bcrypt.DefaultCost {
		t.Fatalf("the dummy hash has cost %d (%v), want %d", cost, err, bcrypt.DefaultCost)
	}
}

func TestValidateUser(t *testing.T) {
	tests := []struct {
		username, hash string
		want           []string
	}{
		{"alice", hash(t, "x"), nil},
		{"", hash(t, "x"), []string{"username: required"}},
		{"alice", "", []string{"password_hash: required"}},
		{"alice", "plain", []string{"password_hash: not a bcrypt hash"}},
		{"", "", []string{"username: required", "password_hash: required"}},
	}
	for _, tt := range tests {
		var p strictyaml.Problems
		ValidateUser(&p, tt.username, tt.hash)
		err := p.Err()
		if (err == nil) != (tt.want == nil) {
			t.Errorf("ValidateUser(%q, %q) = %v, want %q", tt.username, tt.hash, err, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ValidateUser(%q, %q) = %v, want %q", tt.username, tt.hash, err, w)
			}
		}
	}
}

func TestTokens(t *testing.T) {
	var tokens Tokens[string]
	for _, tok := range []struct{ token, name string }{{"abc", "chef"}, {"xyz", "ci"}, {"anon", ""}, {"dup", "first"}, {"dup", "second"}} {
		tokens.Add(tok.token, tok.name)
	}
	tests := []struct {
		presented string
		name      string
		ok        bool
	}{
		{"abc", "chef", true},
		{"xyz", "ci", true},
		{"anon", "", true},
		{"dup", "second", true},
		{"ab", "", false},
		{"abcd", "", false},
		{"", "", false},
		{"ABC", "", false},
	}
	for _, tt := range tests {
		name, ok := tokens.Check(tt.presented)
		if name != tt.name || ok != tt.ok {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", tt.presented, name, ok, tt.name, tt.ok)
		}
	}
	var none Tokens[string]
	if _, ok := none.Check(""); ok || none.Len() != 0 || tokens.Len() != 5 {
		t.Error("the zero Tokens accepted the empty token, or Len is wrong")
	}
}
