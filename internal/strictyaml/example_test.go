package strictyaml_test

import (
	"fmt"
	"time"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

type Listener struct {
	Address  string `yaml:"address"`
	CertFile string `yaml:"cert_file"`
	TLS      bool   `yaml:"tls"`
}

// SetDefaults gives every listener in the list its defaults.
func (l *Listener) SetDefaults() { l.Address = "127.0.0.1:1883" }

// Validate reports problems relative to the listener.
func (l *Listener) Validate() error {
	var p strictyaml.Problems
	if l.TLS && l.CertFile == "" {
		p.Add("cert_file", "must be set when tls is true")
	}
	return p.Err()
}

type Config struct {
	Listeners []Listener    `yaml:"listeners"`
	Token     string        `yaml:"token" secret:"true"`
	Timeout   time.Duration `yaml:"timeout"`
}

func ExampleDecode() {
	cfg := Config{Timeout: 5 * time.Second} // defaults
	doc := []byte(`
listeners:
  - tls: true
  - adress: 0.0.0.0:1883
token: ${API_TOKEN}
timeout: 10
`)
	err := strictyaml.Decode(doc, &cfg, strictyaml.Options{
		LookupEnv: func(string) (string, bool) { return "", false },
	})
	fmt.Println(err)
	// Output:
	// listeners[1].adress: unknown key (did you mean "address"?)
	// token: environment variable API_TOKEN is not set (use ${API_TOKEN:-} to allow empty)
	// timeout: expected a duration, got "10" (use a unit, e.g. 10s)
	// listeners[0].cert_file: must be set when tls is true
}

func ExampleDecode_secretFile() {
	var cfg Config
	err := strictyaml.Decode([]byte("token_file: /run/secrets/token\n"), &cfg, strictyaml.Options{
		ReadFile: func(string) ([]byte, error) { return []byte("s3cret\n"), nil },
	})
	fmt.Printf("%q %v\n", cfg.Token, err)
	// Output:
	// "s3cret" <nil>
}
