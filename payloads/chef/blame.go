package chef

import (
	"regexp"
	"slices"
	"strings"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// Members a failed run's published body gains, and the status summary has.
const (
	// FailedCookbookKey holds the FailedCookbook, null when the run
	// succeeded or the cookbook at fault is unknown.
	FailedCookbookKey = "failed_cookbook"
	// OwnerKey holds the name of the team that owns the failed cookbook,
	// null when none does.
	OwnerKey = "owner"
)

// How a failed cookbook was found.
const (
	// BlamedByResource: the failed resource's cookbook_name.
	BlamedByResource = "resource"
	// BlamedByBacktrace: the innermost backtrace frame under
	// cookbooks/<name>/, for a failure with no failed resource (a
	// compile-time error, say).
	BlamedByBacktrace = "backtrace"
)

// FailedCookbook is the cookbook whose code failed a run.
type FailedCookbook struct {
	Name string `json:"name"`
	// Version is the resource's cookbook_version, else the version the
	// node's cookbooks list; nil when neither says.
	Version *string `json:"version"`
	// BlamedBy is BlamedByResource or BlamedByBacktrace.
	BlamedBy string `json:"blamed_by"`
	// Resource is the failed resource as Chef names it, "type[name]", when
	// BlamedBy is BlamedByResource.
	Resource string `json:"resource,omitempty"`
	// Recipe is the failed resource's recipe_name, when it has one.
	Recipe string `json:"recipe,omitempty"`
}

// CookbookVersion is one cookbook of a node and its version.
type CookbookVersion struct {
	Name, Version string
}

// Cookbooks returns the node's cookbooks and their versions, sorted by name:
// node.automatic.cookbooks, or else the top-level cookbooks newer clients
// send, both {"<name>": {"version": "<version>"}}. A cookbook without a
// version string is left out; of duplicate names, the last one counts.
func (c *RunConverge) Cookbooks() []CookbookVersion {
	if c.cookbooks == nil {
		return nil
	}
	out := make([]CookbookVersion, 0, 64)
	it := jsonscan.Members(c.cookbooks)
	for it.Next() {
		v, _ := jsonscan.Get(it.Value(), "version")
		version, ok := jsonscan.Str(v)
		if !ok {
			continue
		}
		out = append(out, CookbookVersion{Name: jsonscan.Key(it.Key()), Version: version})
	}
	// Stable, so that of duplicates the last stays last, then kept.
	slices.SortStableFunc(out, func(a, b CookbookVersion) int { return strings.Compare(a.Name, b.Name) })
	for i := len(out) - 1; i > 0; i-- {
		if out[i].Name == out[i-1].Name {
			out = slices.Delete(out, i-1, i)
		}
	}
	return out
}

// EachCookbook calls f with each cookbook of Cookbooks' source as written:
// its key without the quotes, and its "version" value, raw (nil when it has
// none), in body order, decoding and allocating nothing. It returns how
// many there are. It is for telling cheaply that a node's cookbooks did not
// change; Cookbooks is what they are.
func (c *RunConverge) EachCookbook(f func(name, version []byte)) int {
	n := 0
	it := jsonscan.Members(c.cookbooks)
	for it.Next() {
		v, _ := jsonscan.Get(it.Value(), "version")
		f(it.Key(), v)
		n++
	}
	return n
}

// version is the version the node's cookbooks give name, nil when none.
func (c *RunConverge) version(name string) *string {
	v, _ := jsonscan.Path(c.cookbooks, name, "version")
	return optStr(v)
}

// maxFrames bounds the backtrace frames read for blame.
const maxFrames = 1000

// frameCookbook finds the cookbook of a backtrace frame: the directory after
// a "cookbooks" directory, with / or \ as separators.
var frameCookbook = regexp.MustCompile(`(?:^|[/\\])cookbooks[/\\]([^/\\]+)[/\\]`)

// Blame returns the cookbook whose code failed the run, found in this
// order: the failed resource's cookbook_name (a resource whose failure was
// ignored did not fail the run); else the innermost backtrace frame under
// cookbooks/<name>/ (a compile-time failure has no failed resource); else
// nil, as for a run that succeeded.
func (c *RunConverge) Blame() *FailedCookbook {
	if c.Status != "failure" {
		return nil
	}
	for _, r := range c.Resources {
		if r.Status != "failed" || r.CookbookName == "" || ignored(r.Raw) {
			continue
		}
		f := &FailedCookbook{Name: r.CookbookName, BlamedBy: BlamedByResource}
		if v, _ := jsonscan.Get(r.Raw, "cookbook_version"); jsonscan.Kind(v) == jsonscan.String {
			f.Version = optStr(v)
		} else {
			f.Version = c.version(r.CookbookName)
		}
		typ, _ := jsonscan.Get(r.Raw, "type")
		name, _ := jsonscan.Get(r.Raw, "name")
		if t, ok := jsonscan.Str(typ); ok {
			n, _ := jsonscan.Str(name)
			f.Resource = t + "[" + n + "]"
		}
		recipe, _ := jsonscan.Get(r.Raw, "recipe_name")
		f.Recipe, _ = jsonscan.Str(recipe)
		return f
	}
	if c.Error == nil {
		return nil
	}
	frames := jsonscan.Elements(c.Error.Backtrace)
	for n := 0; n < maxFrames && frames.Next(); n++ {
		frame, ok := jsonscan.Str(frames.Value())
		if !ok {
			continue
		}
		if m := frameCookbook.FindStringSubmatch(frame); m != nil {
			return &FailedCookbook{Name: m[1], Version: c.version(m[1]), BlamedBy: BlamedByBacktrace}
		}
	}
	return nil
}

// ignored reports whether a resource record's ignore_failure is set: true,
// or a string such as "quiet" (Chef 14's :quiet), as Chef Automate reads it.
func ignored(record []byte) bool {
	v, _ := jsonscan.Get(record, "ignore_failure")
	switch jsonscan.Kind(v) {
	case jsonscan.True:
		return true
	case jsonscan.String:
		s, _ := jsonscan.Str(v)
		return s == "true" || s == "quiet"
	}
	return false
}
