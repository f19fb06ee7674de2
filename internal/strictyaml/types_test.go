package strictyaml

import (
	"fmt"
	"strings"
	"time"
)

// The types below model a firehose-like configuration, used by the tests
// and the fuzzer.

// level implements encoding.TextUnmarshaler with a pointer receiver.
type level int

func (l *level) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "debug":
		*l = 1
	case "info":
		*l = 2
	default:
		return fmt.Errorf("unknown level %q; use debug or info", b)
	}
	return nil
}

type tlsConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

type listener struct {
	Name    string     `yaml:"name"`
	Address string     `yaml:"address"`
	TLS     *tlsConfig `yaml:"tls"`
}

func (l *listener) SetDefaults() { l.Address = "127.0.0.1:1883" }

func (l *listener) Validate() error {
	var p Problems
	if l.TLS != nil && l.TLS.CertFile == "" {
		p.Add("tls.cert_file", "must be set when tls is given")
	}
	if l.Name == "bad" {
		p.Add("", "listener %q is not allowed", l.Name)
	}
	return p.Err()
}

type user struct {
	Name     string   `yaml:"name"`
	Password string   `yaml:"password" secret:"true"`
	ACL      []string `yaml:"acl"`
}

func (u *user) SetDefaults() { u.ACL = []string{"public/#"} }

type broker struct {
	Address   string     `yaml:"address"`
	TLS       *tlsConfig `yaml:"tls"`
	Users     []user     `yaml:"users"`
	Listeners []listener `yaml:"listeners"`
	MaxQueued int        `yaml:"max_queued"`
}

type token struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token" secret:"true"`
}

type httpConfig struct {
	Address     string        `yaml:"address"`
	Token       string        `yaml:"token" secret:"true"`
	Tokens      []token       `yaml:"tokens"`
	ReadTimeout time.Duration `yaml:"read_timeout"`
	Level       *level        `yaml:"level"`
}

type route struct {
	Topic string `yaml:"topic"`
	QoS   uint8  `yaml:"qos"`
}

func (r *route) SetDefaults() { r.QoS = 1 }

// common is inlined into config.
type common struct {
	Instance string `yaml:"instance"`
}

type config struct {
	Broker  broker            `yaml:"broker"`
	HTTP    httpConfig        `yaml:"http"`
	Level   level             `yaml:"level"`
	Debug   bool              `yaml:"debug"`
	Small   int8              `yaml:"small"`
	Port    uint16            `yaml:"port"`
	Ratio   float64           `yaml:"ratio"`
	Tags    map[string]string `yaml:"tags"`
	Routes  map[string]*route `yaml:"routes"`
	Extra   any               `yaml:"extra"`
	Hosts   []string          `yaml:"hosts"`
	Ptr     *int              `yaml:"ptr"`
	Pair    [2]int            `yaml:"pair"`
	Ignored string            `yaml:"-"`
	NoTag   string
	common  `yaml:",inline"`
}

func defaultConfig() config {
	return config{
		Broker: broker{Address: ":1883", MaxQueued: 1000, Users: []user{{Name: "default"}}},
		HTTP:   httpConfig{Address: "127.0.0.1:8080", ReadTimeout: 5 * time.Second},
		Level:  2,
		Port:   8080,
		Hosts:  []string{"a", "b"},
		Tags:   map[string]string{"env": "dev"},
		common: common{Instance: "default"},
	}
}
