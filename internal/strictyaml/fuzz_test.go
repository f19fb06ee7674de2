package strictyaml

import (
	"errors"
	"io/fs"
	"testing"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		"",
		"null",
		"broker:\n  address: x\n",
		"broker:\n  adress: x\n  max_queued: lots\n",
		"http:\n  token_file: /secret\n  read_timeout: 10\n",
		"http:\n  token: ${TOKEN:-x}\n  token_file: ${FILE}\n",
		"broker: {listeners: [{tls: {}}, {name: bad}]}\n",
		"base: &b {address: x}\nbroker:\n  <<: *b\n  tls: *b\n",
		"broker: &a {users: [*a]}\n",
		"a: &a [*a]\n",
		"extra: &x {a: [*x]}\n",
		"routes:\n  a.b: {topic: t, qos: 300}\n  '': ~\n",
		"pair: [1, 2, 3]\nsmall: 128\nport: -1\nratio: .inf\n",
		"debug: yes\nlevel: trace\n",
		"tags: {<<: [{a: b}, {c: d}], a: z}\n",
		"hosts: !!str x\nptr: ~\n",
		"a: 1\n---\nb: 2\n",
		"extra: ${X\n",
		"instance: $${x} $2a$10$abc\n",
		"broker:\n  users:\n    - {name: u, password_file: /secret, acl: [a, b]}\n",
		"{? [a]: b}",
		"- a\n- b\n",
		"broker:\n  <<: {<<: {<<: {address: deep}}}\n",
		"broker: &b\n  <<: *b\n",
		"port: 0644\nsmall: -0x80\nptr: 9223372036854775808\n",
		"extra: {port: \"${TOKEN}\", list: [\"$${x}\"]}\n",
		"tags:\n  a.b: x\n  \"\": y\n  ~: z\n  1: w\n",
		"broker:\n  address: &k max_queued\n  *k : 5\n",
		"http:\n  level: !!str null\n  token_file: ${EMPTY}\n",
		"broker:\n  listeners:\n    - &l {name: a, tls: {cert_file: c}}\n    - <<: [*l, {address: x}]\n      name: b\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	env := map[string]string{"TOKEN": "t", "FILE": "/secret", "EMPTY": ""}
	opts := Options{
		LookupEnv: func(name string) (string, bool) { v, ok := env[name]; return v, ok },
		ReadFile: func(path string) ([]byte, error) {
			if path == "/secret" {
				return []byte("s3cret\n"), nil
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c1 := defaultConfig()
		err1 := Decode(data, &c1, opts)
		c2 := defaultConfig()
		err2 := Decode(data, &c2, opts)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("not deterministic:\n%v\n---\n%v", err1, err2)
		}
		if err1 == nil {
			return
		}
		u, ok := err1.(interface{ Unwrap() []error })
		if !ok {
			t.Fatalf("error is not a join: %T", err1)
		}
		for _, e := range u.Unwrap() {
			var ke *KeyError
			if !errors.As(e, &ke) || ke != e {
				t.Fatalf("error %T is not a *KeyError: %v", e, e)
			}
			if ke.Err == nil || ke.Error() == "" {
				t.Fatalf("empty error %#v", ke)
			}
			if ke.Line < 0 {
				t.Fatalf("negative line in %#v", ke)
			}
		}
	})
}
