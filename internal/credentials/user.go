package credentials

import (
	"fmt"

	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// User is an account of the embedded broker that may publish: an entry of
// broker.users or of broker.users_file. It lives here, beside the checks of
// its password, so that the config loading reads users files without
// importing the broker.
type User struct {
	Username string `yaml:"username"`
	// PasswordHash is a bcrypt hash ($2a$, $2b$ or $2y$), as printed by
	// `bridge passwd` or `htpasswd -nB`. Plain-text passwords are never stored.
	PasswordHash string `yaml:"password_hash" secret:"true"`
	// Publish lists the topic filters this user may publish to. Empty means none.
	Publish []string `yaml:"publish"`
	// Subscribe lists the topic filters this user may subscribe to. Absent
	// means everything, as for anonymous clients.
	Subscribe []string `yaml:"subscribe"`
}

// Validate checks one user.
func (u *User) Validate() error {
	var p strictyaml.Problems
	ValidateUser(&p, u.Username, u.PasswordHash)
	for i, f := range u.Publish {
		if err := topics.ValidFilter(f); err != nil {
			p.Add(fmt.Sprintf("publish[%d]", i), "%v", err)
		}
	}
	for i, f := range u.Subscribe {
		if err := topics.ValidFilter(f); err != nil {
			p.Add(fmt.Sprintf("subscribe[%d]", i), "%v", err)
		}
	}
	return p.Err()
}
