package chef

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Owners maps teams to the cookbooks they own (the chef.owners section), so
// that a failure reaches the team whose code failed. Policyfile Includes
// (RFC 097) are how several teams share a node: the team that owns an
// included policy owns the cookbooks that policy locks.
type Owners struct {
	// Teams by name. A team owns cookbooks by name or pattern ("mysql",
	// "mysql-*": * matches any run of characters, ? one), and every
	// cookbook locked by a policy it owns.
	Teams map[string]Team `yaml:"teams"`
	// PolicyLocks is the directory of Policyfile lock files (*.lock.json,
	// as chef install writes them), read at start and again when they
	// change. Required when a team owns a policy.
	PolicyLocks string `yaml:"policy_locks"`
	// ReloadInterval is how often the directory is checked for changes.
	// Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Team is what one team owns.
type Team struct {
	Cookbooks []string `yaml:"cookbooks"`
	Policies  []string `yaml:"policies"`
}

// maxLockBytes bounds one lock file: real ones are tens of kilobytes.
const maxLockBytes = 16 << 20

// Validate reports every problem that needs no lock file at once: names,
// patterns, and two teams claiming one cookbook by name or pattern.
func (o *Owners) Validate() error {
	var p strictyaml.Problems
	policies := false
	for _, name := range slices.Sorted(maps.Keys(o.Teams)) {
		t := o.Teams[name]
		key := "teams." + name
		if name == "" {
			p.Add("teams", "a team has an empty name")
		}
		if len(t.Cookbooks) == 0 && len(t.Policies) == 0 {
			p.Add(key, "owns nothing; give cookbooks (names or patterns) or policies")
		}
		for i, c := range t.Cookbooks {
			if c == "" || strings.ContainsAny(c, `[]\/`) {
				p.Add(fmt.Sprintf("%s.cookbooks[%d]", key, i),
					"%q is not a cookbook name or pattern: use letters, digits, - and _, with * for any run of characters and ? for one", c)
			}
		}
		for i, pol := range t.Policies {
			if pol == "" {
				p.Add(fmt.Sprintf("%s.policies[%d]", key, i), "empty policy name")
			}
			policies = true
		}
	}
	if policies && o.PolicyLocks == "" {
		p.Add("policy_locks", "required when a team owns a policy: the directory of its Policyfile lock files (*.lock.json)")
	}
	if o.ReloadInterval < 0 {
		p.Add("reload_interval", "must be positive, for example 5s")
	}
	if _, _, err := o.resolve(nil); err != nil {
		p.Wrap("teams", err)
	}
	return p.Err()
}

// policyLock is what ownership needs of one Policyfile lock file.
type policyLock struct {
	file      string
	name      string
	cookbooks []string // the keys of cookbook_locks: its own and its includes'
	includes  []string // the names in included_policy_locks
}

// lockFile is the part of a lock file that is read.
type lockFile struct {
	Name                string                     `json:"name"`
	CookbookLocks       map[string]json.RawMessage `json:"cookbook_locks"`
	IncludedPolicyLocks []struct {
		Name string `json:"name"`
	} `json:"included_policy_locks"`
}

// readLocks reads every *.lock.json in dir, by policy name.
func readLocks(dir string) (map[string]*policyLock, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lock.json"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("policy_locks: %w", err)
	}
	slices.Sort(files)
	locks := map[string]*policyLock{}
	var errs []error
	for _, f := range files {
		l, err := readLock(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := locks[l.name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s both lock policy %q; keep one", prev.file, f, l.name))
			continue
		}
		locks[l.name] = l
	}
	return locks, errors.Join(errs...)
}

func readLock(path string) (*policyLock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLockBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxLockBytes {
		return nil, fmt.Errorf("%s: over %d bytes; is it a lock file?", path, maxLockBytes)
	}
	var lf lockFile
	if err := json.Unmarshal(data, &lf); err != nil {
		return nil, fmt.Errorf("%s: not a Policyfile lock: %w", path, err)
	}
	if lf.Name == "" {
		return nil, fmt.Errorf("%s: no policy name", path)
	}
	l := &policyLock{file: path, name: lf.Name}
	for cb := range lf.CookbookLocks {
		l.cookbooks = append(l.cookbooks, cb)
	}
	slices.Sort(l.cookbooks)
	for _, inc := range lf.IncludedPolicyLocks {
		l.includes = append(l.includes, inc.Name)
	}
	return l, nil
}

// ownership answers which team owns a cookbook. It is immutable once built.
type ownership struct {
	exact    map[string]string // cookbook → team
	patterns []teamPattern
}

type teamPattern struct {
	pattern, team string
}

// owner returns the team that owns cookbook, "" when none does.
func (o *ownership) owner(cookbook string) string {
	if o == nil {
		return ""
	}
	if t, ok := o.exact[cookbook]; ok {
		return t
	}
	for _, p := range o.patterns {
		if globMatch(p.pattern, cookbook) {
			return p.team
		}
	}
	return ""
}

// claim is where a team's ownership of a cookbook comes from, for errors.
type claim struct {
	team, from string
}

// resolve builds the ownership from the teams and the locks by policy name
// (nil: policies are not looked at). A cookbook a team names (or matches by
// a pattern) is that team's, even where another team's policy locks it: a
// name is more precise than a policy. Two teams naming one cookbook, or
// whose policies both lock it as their own, is an error naming both; so is
// a policy that no lock names, or whose included policies' locks are
// missing. shadowed lists the policy claims that names overrode.
func (o *Owners) resolve(locks map[string]*policyLock) (own *ownership, shadowed []string, err error) {
	own = &ownership{exact: map[string]string{}}
	named := map[string]claim{}    // by name, in cookbooks
	byPolicy := map[string]claim{} // locked as its own by a team's policy
	var errs []error
	conflict := func(cookbook string, a, b claim) {
		errs = append(errs, fmt.Errorf("cookbook %q is owned by two teams: %s (%s) and %s (%s)",
			cookbook, a.team, a.from, b.team, b.from))
	}
	var patterns []claimedPattern
	for _, team := range slices.Sorted(maps.Keys(o.Teams)) {
		t := o.Teams[team]
		for i, c := range t.Cookbooks {
			cl := claim{team, fmt.Sprintf("cookbooks[%d] %q", i, c)}
			if strings.ContainsAny(c, "*?") {
				patterns = append(patterns, claimedPattern{c, cl})
				own.patterns = append(own.patterns, teamPattern{c, team})
				continue
			}
			if prev, ok := named[c]; ok && prev.team != team {
				conflict(c, prev, cl)
			} else if !ok {
				named[c] = cl
				own.exact[c] = team
			}
		}
		if locks == nil {
			continue
		}
		for i, pol := range t.Policies {
			cookbooks, err := ownCookbooks(pol, locks)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: policies[%d]: %w", team, i, err))
				continue
			}
			for _, cb := range cookbooks {
				cl := claim{team, fmt.Sprintf("policy %q, %s", pol, filepath.Base(locks[pol].file))}
				if prev, ok := byPolicy[cb]; ok && prev.team != team {
					conflict(cb, prev, cl)
				} else if !ok {
					byPolicy[cb] = cl
				}
			}
		}
	}
	// A pattern of one team must not reach a name another team gives.
	for _, p := range patterns {
		for _, cb := range slices.Sorted(maps.Keys(named)) {
			if c := named[cb]; c.team != p.team && globMatch(p.pattern, cb) {
				conflict(cb, c, p.claim)
			}
		}
	}
	for i, p := range patterns {
		for _, q := range patterns[i+1:] {
			if p.team != q.team && globsOverlap(p.pattern, q.pattern) {
				errs = append(errs, fmt.Errorf("a cookbook could be owned by two teams: %s (%s) and %s (%s) match the same names",
					p.team, p.from, q.team, q.from))
			}
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	// Policies give what no name or pattern claims.
	for _, cb := range slices.Sorted(maps.Keys(byPolicy)) {
		c := byPolicy[cb]
		if team := own.owner(cb); team != "" {
			if team != c.team {
				shadowed = append(shadowed, fmt.Sprintf("%s: %s's by name, not %s's (%s)", cb, team, c.team, c.from))
			}
			continue
		}
		own.exact[cb] = c.team
	}
	return own, shadowed, nil
}

type claimedPattern struct {
	pattern string
	claim
}

// ownCookbooks are the cookbooks policy locks itself: those of its lock
// less those of the policies it includes, whose owners own them.
func ownCookbooks(policy string, locks map[string]*policyLock) ([]string, error) {
	l, ok := locks[policy]
	if !ok {
		return nil, fmt.Errorf("no lock file names policy %q", policy)
	}
	theirs := map[string]bool{}
	for _, inc := range l.includes {
		il, ok := locks[inc]
		if !ok {
			return nil, fmt.Errorf("policy %q includes %q, whose lock file is not in policy_locks: which cookbooks are %q's own cannot be told",
				policy, inc, policy)
		}
		for _, cb := range il.cookbooks {
			theirs[cb] = true
		}
	}
	var out []string
	for _, cb := range l.cookbooks {
		if !theirs[cb] {
			out = append(out, cb)
		}
	}
	return out, nil
}

// globMatch matches name against a pattern of literal characters, * (any
// run) and ? (one character).
func globMatch(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// The classic two-pointer match with backtracking to the last star.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// globsOverlap reports whether some name matches both patterns.
func globsOverlap(a, b string) bool {
	p, q := []rune(a), []rune(b)
	memo := map[[2]int]bool{}
	var overlap func(i, j int) bool
	overlap = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var r bool
		switch {
		case i == len(p) && j == len(q):
			r = true
		case i < len(p) && p[i] == '*':
			r = overlap(i+1, j) || (j < len(q) && overlap(i, j+1))
		case j < len(q) && q[j] == '*':
			r = overlap(i, j+1) || (i < len(p) && overlap(i+1, j))
		case i == len(p) || j == len(q):
			r = false
		default:
			r = (p[i] == '?' || q[j] == '?' || p[i] == q[j]) && overlap(i+1, j+1)
		}
		memo[key] = r
		return r
	}
	return overlap(0, 0)
}

// owners holds the current ownership, and reloads it when the lock files
// change. It is safe for concurrent use.
type owners struct {
	cfg     Owners
	current atomic.Pointer[ownership]
	log     zerolog.Logger
	reloads *prometheus.CounterVec
	// seen is the fingerprint of the lock directory as it was just before
	// its last read: a change made while it was being read (a file still
	// being written) differs from it, and is read at the next look.
	seen string
	// readLocks reads the lock directory: readLocks, but for a test that
	// changes a file in the middle of a read.
	readLocks func(dir string) (map[string]*policyLock, error)
}

// newOwners reads the lock files and builds the ownership: a problem is an
// error naming the file, or both teams of a conflict.
func newOwners(cfg Owners, log zerolog.Logger, reloads *prometheus.CounterVec) (*owners, error) {
	o := &owners{cfg: cfg, log: log, reloads: reloads, readLocks: readLocks}
	if o.cfg.ReloadInterval == 0 {
		o.cfg.ReloadInterval = 5 * time.Second
	}
	if o.cfg.PolicyLocks != "" {
		o.seen = fingerprint(o.cfg.PolicyLocks)
	}
	own, err := o.load()
	if err != nil {
		return nil, err
	}
	o.current.Store(own)
	return o, nil
}

// load reads the lock directory, if any, and resolves the ownership.
func (o *owners) load() (*ownership, error) {
	locks := map[string]*policyLock{}
	if o.cfg.PolicyLocks != "" {
		var err error
		if locks, err = o.readLocks(o.cfg.PolicyLocks); err != nil {
			return nil, err
		}
	}
	own, shadowed, err := o.cfg.resolve(locks)
	if len(shadowed) > 0 {
		o.log.Info().Strs("cookbooks", shadowed).Msg("cookbooks a team names, also locked by another team's policy")
	}
	return own, err
}

// owner returns the team that owns cookbook, "" when none does.
func (o *owners) owner(cookbook string) string {
	if o == nil {
		return ""
	}
	return o.current.Load().owner(cookbook)
}

// listing is a fingerprint of the lock files in dir: names, sizes and
// modification times.
func listing(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lock.json"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("policy_locks: %w", err)
	}
	slices.Sort(files)
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			continue // removed meanwhile: the next look sees it gone
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

// fingerprint is listing, or the error that stopped it: a directory that
// stays missing is then one change, reported once, not one at every look.
func fingerprint(dir string) string {
	l, err := listing(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	return l
}

// reload reads the lock files again if they changed since the last look.
// On a problem the previous ownership stays, and the problem is logged once.
func (o *owners) reload() {
	now := fingerprint(o.cfg.PolicyLocks)
	if now == o.seen {
		return
	}
	o.seen = now // taken before the read: see the field
	own, err := o.load()
	if err != nil {
		o.reloads.WithLabelValues("error").Inc()
		o.log.Error().Err(err).Str("policy_locks", o.cfg.PolicyLocks).
			Msg("policy lock files not reloaded; the previous ownership stays until they are fixed")
		return
	}
	o.current.Store(own)
	o.reloads.WithLabelValues("ok").Inc()
	o.log.Info().Str("policy_locks", o.cfg.PolicyLocks).Int("cookbooks", len(own.exact)).Msg("policy lock files reloaded")
}

// run checks the lock directory every ReloadInterval until ctx is done.
func (o *owners) run(ctx context.Context) {
	if o.cfg.PolicyLocks == "" {
		return
	}
	t := time.NewTicker(o.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.reload()
		}
	}
}
