package configcore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Runtime tunes Go's garbage collector for a message bus, which allocates a
// copy of every message per subscriber and so spends much of its CPU in the
// collector at the default GOGC of 100. The GOGC and GOMEMLIMIT environment
// variables, when set, win over these.
type Runtime struct {
	// GCPercent is GOGC while the live heap is small: the heap may grow by
	// this percentage of the live heap before a collection. Higher trades
	// memory for CPU. As the live heap grows past 64 MiB/GCPercent (a big
	// fleet's state), the percentage falls so that the growth stays near 64
	// MiB, down to 100 (internal/gctune). -1 turns the collector off.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is GOMEMLIMIT, a soft limit that makes the collector work
	// harder near it; 0 means none. Set it below the container's limit.
	MemoryLimit bytesize.Size `yaml:"memory_limit"`
}

// ValidateCommon checks the settings every binary's file has at its top
// level: shutdown_timeout and runtime.
func ValidateCommon(p *strictyaml.Problems, shutdownTimeout time.Duration, rt Runtime) {
	if shutdownTimeout <= 0 {
		p.Add("shutdown_timeout", "must be positive, for example 15s")
	}
	if rt.GCPercent < 25 && rt.GCPercent != -1 {
		p.Add("runtime.gc_percent", "must be at least 25, or -1 to turn the collector off (with memory_limit)")
	}
	if rt.GCPercent == -1 && rt.MemoryLimit == 0 {
		p.Add("runtime.memory_limit", "required when gc_percent is -1, or memory grows without bound")
	}
}

// Options are the environment a config is loaded in; zero values mean the
// real process environment.
type Options struct {
	LookupEnv func(string) (string, bool)
	ReadFile  func(string) ([]byte, error)
	// Dir is the directory a relative broker.users_file is resolved
	// against; Load sets it to the config file's own directory. Empty means
	// the working directory.
	Dir string
	// Overrides are applied over the file, in order (see Override).
	Overrides []Override
	// SyntaxOnly checks the file's shape and values but not what it refers
	// to: unset ${VAR}s, missing files (secrets, certificates, users_file)
	// are not problems. It is `bridge check --syntax-only`, for a config
	// checked away from the machine it is meant for, as promtool's
	// --syntax-only does.
	SyntaxOnly bool
}

// Load reads the file at path over the defaults. An empty path means no file:
// the defaults. Every problem in the file is reported at once, each naming its
// key. A relative broker.users_file is taken from the file's directory.
//
// cfg holds the defaults; parse is the config's own Parse.
func Load[C any](path string, cfg *C, opts Options, parse func([]byte, *C, Options) error) error {
	if path == "" {
		if len(opts.Overrides) == 0 {
			return nil
		}
		if err := parse(nil, cfg, opts); err != nil {
			return fmt.Errorf("config:\n%w", err)
		}
		return nil
	}
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	if err := parse(data, cfg, opts); err != nil {
		return fmt.Errorf("config %s:\n%w", path, err)
	}
	return nil
}

// Parse decodes YAML over cfg, a pointer to a config file's struct holding
// the defaults, with the overrides applied, then loads the users file that
// users.File names (broker.users_file inside cfg; a relative path is taken
// from opts.Dir) into users.Users (broker.users).
// It reports every problem at once, and returns the keys the file wrote (see
// givenKeys) and the keys the overrides set.
func Parse(data []byte, cfg any, users Users, opts Options) (map[string]bool, Sources, error) {
	var sources Sources
	if len(opts.Overrides) > 0 {
		var err error
		if data, sources, err = applyOverrides(data, opts.Overrides); err != nil {
			return nil, nil, err
		}
	}
	given, err := parse(data, cfg, users, opts)
	if opts.SyntaxOnly {
		err = withoutOutsideProblems(err)
	}
	return given, sources, sources.Name(err)
}

// Users points into a config struct at the broker's users and its users
// file, which Parse completes once it has decoded the struct.
type Users struct {
	Users *[]credentials.User
	File  *string
}

func parse(data []byte, cfg any, u Users, opts Options) (map[string]bool, error) {
	sopts := strictyaml.Options{LookupEnv: opts.LookupEnv, ReadFile: opts.ReadFile}
	err := strictyaml.Decode(data, cfg, sopts)
	given := givenKeys(data)
	if *u.File != "" {
		if !filepath.IsAbs(*u.File) && opts.Dir != "" {
			*u.File = filepath.Join(opts.Dir, *u.File)
		}
		users, uerr := loadUsersFile(*u.File, sopts)
		if uerr == nil {
			uerr = checkNoOverlap(*u.Users, users)
			*u.Users = append(*u.Users, users...)
		}
		err = errors.Join(err, reroot("broker.users_file", uerr))
	}
	return given, err
}

// withoutOutsideProblems drops the problems that are about the machine the
// config is checked on rather than the config: unset variables and missing
// files.
func withoutOutsideProblems(err error) error {
	if err == nil {
		return nil
	}
	var kept []error
	for _, e := range flatten(err) {
		if !errors.Is(e, strictyaml.ErrUnsetVariable) && !errors.Is(e, fs.ErrNotExist) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// usersFile is the shape of broker.users_file: the same user entries as broker.users.
type usersFile struct {
	Users []credentials.User `yaml:"users"`
}

// loadUsersFile reads a users file. Errors name keys inside that file.
func loadUsersFile(path string, opts strictyaml.Options) ([]credentials.User, error) {
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var f usersFile
	if err := strictyaml.Decode(data, &f, opts); err != nil {
		return nil, fmt.Errorf("in %s: %w", path, err)
	}
	return f.Users, nil
}

// checkNoOverlap refuses a user defined both in the config and in the users
// file, since which one wins would be a surprise.
func checkNoOverlap(inConfig, inFile []credentials.User) error {
	names := map[string]bool{}
	for _, u := range inConfig {
		names[u.Username] = true
	}
	var errs []error
	for i, u := range inFile {
		if names[u.Username] {
			errs = append(errs, fmt.Errorf("users[%d]: %q is also defined in broker.users; define each user once", i, u.Username))
		}
	}
	return errors.Join(errs...)
}

// reroot reports err under key, so a problem in the users file reads
// "broker.users_file: in users.yaml: users[0].password_hash: ...".
func reroot(key string, err error) error {
	if err == nil {
		return nil
	}
	return &strictyaml.KeyError{Key: key, Err: err}
}

// givenKeys lists the keys a config file writes: each top-level key and each
// key one level below it ("http" and "http.address"). It only looks at keys,
// so a file that does not parse gives nothing; strictyaml reports why.
func givenKeys(data []byte) map[string]bool {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	keys := map[string]bool{}
	for key, value := range mappingKeys(doc.Content[0], 0) {
		keys[key] = true
		for sub := range mappingKeys(value, 0) {
			keys[key+"."+sub] = true
		}
	}
	return keys
}

// mappingKeys returns the keys of a mapping node and their values, with the
// keys of merged mappings (<<: *anchor) included. depth bounds merges of
// merges.
func mappingKeys(n *yaml.Node, depth int) map[string]*yaml.Node {
	keys := map[string]*yaml.Node{}
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode || depth > 8 {
		return keys
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
			continue
		}
		keys[k.Value] = v
	}
	for _, m := range merged {
		for k, v := range mappingKeys(m, depth+1) {
			if _, ok := keys[k]; !ok {
				keys[k] = v
			}
		}
	}
	return keys
}
