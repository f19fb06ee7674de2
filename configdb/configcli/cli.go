package configcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/opsfirehose/firehose/internal/terminal"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the server refused, or could not be reached
	exitUsage = 2 // bad arguments: nothing was sent
)

// Run runs `bridge configdb <command> ...` (also `bridge config`) and
// returns the exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	r := &runner{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: lookupEnv, terminal: terminal.Is(stdout)}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "get":
		err = r.get(rest)
	case "set":
		err = r.set(rest, "values")
	case "override":
		err = r.set(rest, "overrides")
	case "del":
		err = r.del(rest, "values")
	case "rm-override":
		err = r.del(rest, "overrides")
	case "history":
		err = r.history(rest)
	case "env", "comp", "def", "lvl":
		if len(rest) == 0 {
			err = usageErrorf("%s needs a subcommand; see bridge configdb help", cmd)
			break
		}
		if rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
			groupUsage(stdout, cmd)
			return exitOK
		}
		err = r.entity(cmd, rest[0], rest[1:])
	default:
		err = usageErrorf("unknown command %q; see bridge configdb help", cmd)
	}
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bridge configdb %s: %v\n", cmd, err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "bridge configdb %s: %v\n", cmd, err)
	return exitError
}

// groupUsage prints usage's lines about one group of subcommands (env,
// comp, def, lvl): its verbs, and where their flags are.
func groupUsage(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage of bridge configdb %s:\n", group)
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  "+group+" "):
			in = true
		case in && !strings.HasPrefix(line, "       "):
			in = false
		}
		if in {
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "Run \"bridge configdb %s <verb> --help\" for a verb's flags.\n", group)
}

const usage = `bridge configdb manages ConfigDB, the tuning-box compatible config API (fuel2 config).
"bridge config" is the same command, by its older name.

Resources (values are always read effective, as Hiera sees them):
  get         --env N [--level l1=v1,l2=v2] --resource R [--key a.b] [--show-lookup] [--format json|yaml|plain]
  set         --env N [--level ...] --resource R [--key a.b] (--value V [--type int|str|bool|json|yaml] | --type null | --format json|yaml < file)
              --value without --type is a string (--type str), as in fuel2 config override ... --value 2
  override    as set, for the level's overrides
  del         --env N [--level ...] --resource R --key a.b
  rm-override as del, for the level's overrides
  history     --env N [--level ...] --resource R [--kind values|overrides]

Environments, components, resource definitions, hierarchy levels:
  env  list | show ID | create [--id N] --components a,b --levels l1,l2 | update ID [--components ...] [--levels ...] | delete ID
  comp list | show ID | create --name N [--resource-definitions r1,r2] | update ID [--name N] [--resource-definitions ID,ID|[]] | delete ID
  def  list [--component-id N] | show ID | create --name N [--component-id N] [--content C --type json|yaml | --data-format json|yaml < file]
       | update ID [--name N] [--component-id N] [--content C --type ... | --data-format ... < file] | delete ID
  lvl  list --env N | show --env N LEVEL

Every command takes --url (default $FIREHOSE_CONFIGDB_URL, else $FIREHOSE_URL/api/v1/config,
else http://127.0.0.1:8080/api/v1/config), --token (default $FIREHOSE_CONFIGDB_TOKEN, sent as
X-Auth-Token) and --user (default $FIREHOSE_CONFIGDB_USER, HTTP Basic with $FIREHOSE_CONFIGDB_PASSWORD),
and --format table|json|yaml for what it prints: a table on a terminal, JSON otherwise.
get --key prints "<key>: <value>" (yaml), {"<key>": <value>} (json), or the bare value (plain).
Writes print what they did ("ResourceValue for key K was set"). A key a.b.0 goes into nested
objects and arrays. Any 4xx or 5xx answer is printed and exits 1; bad arguments exit 2.
`

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

type runner struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) (string, bool)
	// terminal: stdout is a terminal, where output is a table by default.
	terminal bool
}

func (r *runner) getenv(name string) string {
	if r.env == nil {
		return ""
	}
	v, _ := r.env(name)
	return v
}

// flags is a command's flag set with the connection flags every command takes.
type flags struct {
	*flag.FlagSet
	r                *runner
	url, token, user *string
	format           *string
}

func (r *runner) flags(name, defaultFormat string) *flags {
	fs := flag.NewFlagSet("bridge configdb "+name, flag.ContinueOnError)
	fs.SetOutput(r.stderr)
	f := &flags{FlagSet: fs, r: r}
	f.url = fs.String("url", "", "the ConfigDB API `URL` (default $"+EnvURL+", else $"+EnvBridgeURL+"/api/v1/config, else "+DefaultURL+")")
	f.token = fs.String("token", "", "token sent as X-Auth-Token (default $"+EnvToken+")")
	f.user = fs.String("user", "", "HTTP Basic user (default $"+EnvUser+"; the password comes from $"+EnvPassword+")")
	if defaultFormat != "" {
		if r.terminal {
			defaultFormat = "table"
		}
		f.format = fs.String("format", defaultFormat, "output `format`: table, json or yaml (get: also plain); table on a terminal, else json")
	}
	return f
}

// parse parses flags and positional arguments in any order.
// parseWrite parses the arguments of a create or update: an update names
// what it changes, by one positional argument.
func (f *flags) parseWrite(verb string, args []string) ([]string, error) {
	positional := 0
	if verb == "update" {
		positional = 1
	}
	return f.parse(args, positional)
}

// parseOneID parses the arguments of a command that takes one id.
func (f *flags) parseOneID(args []string) (string, error) {
	pos, err := f.parse(args, 1)
	if err != nil {
		return "", err
	}
	return parseID(pos[0])
}

func (f *flags) parse(args []string, positional int) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErrorf("%v", err)
		}
		if f.NArg() == 0 {
			break
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
	if len(pos) != positional {
		return nil, usageErrorf("expected %d argument(s), got %q", positional, pos)
	}
	return pos, nil
}

func (f *flags) client() *client {
	base := *f.url
	if base == "" {
		base = f.r.getenv(EnvURL)
	}
	if base == "" {
		if b := f.r.getenv(EnvBridgeURL); b != "" {
			base = strings.TrimSuffix(b, "/") + "/api/v1/config"
		}
	}
	if base == "" {
		base = DefaultURL
	}
	token := *f.token
	if token == "" {
		token = f.r.getenv(EnvToken)
	}
	user := *f.user
	if user == "" {
		user = f.r.getenv(EnvUser)
	}
	return newClient(base, token, user, f.r.getenv(EnvPassword))
}

// resourceFlags are --env, --level and --resource.
type resourceFlags struct {
	env      *int64
	level    *string
	resource *string
}

func (f *flags) resourceFlags() resourceFlags {
	return resourceFlags{
		env:      f.Int64("env", 0, "environment `ID` (required)"),
		level:    f.String("level", "", "level path `l1=v1,l2=v2`, least specific first; none is the environment-wide level"),
		resource: f.String("resource", "", "resource `NAME` or id (required)"),
	}
}

// path builds /environments/<env>/<levels>resources/<res>/<last>.
func (rf resourceFlags) path(last string) (string, error) {
	if *rf.env <= 0 {
		return "", usageErrorf("--env is required")
	}
	if *rf.resource == "" {
		return "", usageErrorf("--resource is required")
	}
	var b strings.Builder
	b.WriteString("/environments/" + strconv.FormatInt(*rf.env, 10) + "/")
	if *rf.level != "" {
		for _, part := range strings.Split(*rf.level, ",") {
			name, value, ok := strings.Cut(part, "=")
			if !ok || name == "" || value == "" {
				return "", usageErrorf("--level must be in the form level1=value1,level2=value2")
			}
			b.WriteString(url.PathEscape(name) + "/" + url.PathEscape(value) + "/")
		}
	}
	b.WriteString("resources/" + url.PathEscape(*rf.resource) + "/" + last)
	return b.String(), nil
}

func (r *runner) get(args []string) error {
	f := r.flags("get", "json")
	rf := f.resourceFlags()
	key := f.String("key", "", "print only this `key` (a.b.0 for nested values)")
	lookup := f.Bool("show-lookup", false, "show the level each value comes from")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	if *f.format != "json" && *f.format != "yaml" && *f.format != "plain" && *f.format != "table" {
		return usageErrorf("--format must be table, json, yaml or plain")
	}
	path, err := rf.path("values")
	if err != nil {
		return err
	}
	q := url.Values{}
	path += "?effective"
	if *lookup {
		path += "&show_lookup"
	}
	if *key != "" {
		q.Set("key", *key)
		path += "&" + q.Encode()
	}
	rep, err := f.client().do(r.ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	if *key != "" && *f.format != "plain" {
		// As spec 002 and fuel2 show one key: "<key>: <value>", the
		// value keeping its type.
		return outputKey(r.stdout, *key, rep.body, *f.format)
	}
	return output(r.stdout, rep.body, *f.format)
}

// set serves set and override: the whole document, or one key.
func (r *runner) set(args []string, kind string) error {
	f := r.flags(map[string]string{"values": "set", "overrides": "override"}[kind], "")
	rf := f.resourceFlags()
	key := f.String("key", "", "set only this `key` (a.b for nested values); without it the whole document is replaced")
	value := f.String("value", "", "the key's `value`, read as --type says")
	typ := f.String("type", "", "type of --value: null, int, str, bool, json or yaml (default str when --value is given)")
	format := f.String("format", "", "format of the document on stdin: json or yaml")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	v, err := r.valueToSet(*key, isSet(f, "value"), *value, *typ, *format)
	if err != nil {
		return err
	}
	path, err := rf.path(kind)
	if err != nil {
		return err
	}
	c := f.client()
	if *key == "" {
		_, err = c.do(r.ctx, "PUT", path, v)
	} else {
		err = setKey(r.ctx, c, path, strings.Split(*key, "."), v)
	}
	if err != nil {
		return err
	}
	// fuel2's confirmation, word for word, so scripts that read it still work.
	fmt.Fprintln(r.stdout, confirmation(kind, *key, "set"))
	return nil
}

// confirmation is the line fuel2 config prints after a write.
func confirmation(kind, key, done string) string {
	entity := map[string]string{"values": "ResourceValue", "overrides": "ResourceOverride"}[kind]
	if key == "" {
		return entity + " was " + done
	}
	return entity + " for key " + key + " was " + done
}

// valueToSet checks set's arguments as tuning-box's client did, and returns
// the value.
func (r *runner) valueToSet(key string, hasValue bool, value, typ, format string) (any, error) {
	switch {
	case key == "":
		if hasValue || typ != "" {
			return nil, usageErrorf("--value and --type make sense only with --key")
		}
		if format == "" {
			return nil, usageErrorf("give --format json|yaml for the document on stdin that replaces the whole resource")
		}
		return readDocument(r.stdin, format, r.stderr)
	case hasValue:
		if format != "" {
			return nil, usageErrorf("--format is for stdin; --value takes --type")
		}
		switch typ {
		case "", "str":
			// The spec's use case gives --value with no --type: a string.
			return value, nil
		case "null":
			return nil, usageErrorf("--type null takes no --value")
		case "int":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, usageErrorf("--value %q is not an int", value)
			}
			return n, nil
		case "bool":
			switch strings.ToLower(value) {
			case "1", "true":
				return true, nil
			case "0", "false":
				return false, nil
			}
			return nil, usageErrorf("bad value for bool: %q; use 0, 1, false or true", value)
		case "json", "yaml":
			v, err := parseValue([]byte(value), typ, r.stderr)
			if err != nil {
				return nil, usageErrorf("--value: %v", err)
			}
			return v, nil
		}
		return nil, usageErrorf("unknown --type %q: use null, int, str, bool, json or yaml", typ)
	case typ == "null":
		return nil, nil
	case typ != "":
		return nil, usageErrorf("--type is for --value, and there is no --value")
	case format == "":
		return nil, usageErrorf("give --value (with --type unless it is a string), --type null, or --format json|yaml for the value on stdin")
	}
	return readDocument(r.stdin, format, r.stderr)
}

// setKey sets one key with a keys operation, which is atomic on the server.
// A level with nothing stored yet has no document to edit, and a keys
// operation there is refused (404, which the server logs): so for a
// top-level key the stored document's ETag is read first, and when nothing
// is stored ("0") the key is created with a PUT that only succeeds if
// nothing was stored meanwhile (If-Match "0"); when something was, the keys
// operation follows.
func setKey(ctx context.Context, c *client, path string, keys []string, v any) error {
	entry := make([]any, 0, len(keys)+1)
	for _, k := range keys {
		entry = append(entry, k)
	}
	entry = append(entry, v)
	if len(keys) == 1 {
		cur, err := c.do(ctx, "GET", path, nil)
		if err != nil {
			return err
		}
		if cur.header.Get("ETag") == `"0"` {
			_, err = c.do(ctx, "PUT", path, map[string]any{keys[0]: v}, "If-Match", `"0"`)
			var ae *apiError
			if err == nil || !errors.As(err, &ae) || ae.status != 412 {
				return err
			}
			// Stored meanwhile: edit that document.
		}
	}
	_, err := c.do(ctx, "PUT", path+"/keys/set", [][]any{entry})
	return err
}

func (r *runner) del(args []string, kind string) error {
	f := r.flags(map[string]string{"values": "del", "overrides": "rm-override"}[kind], "")
	rf := f.resourceFlags()
	key := f.String("key", "", "the `key` to delete (a.b for nested values; required)")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	if *key == "" {
		return usageErrorf("--key is required")
	}
	path, err := rf.path(kind + "/keys/delete")
	if err != nil {
		return err
	}
	entry := []any{}
	for _, k := range strings.Split(*key, ".") {
		entry = append(entry, k)
	}
	if _, err = f.client().do(r.ctx, "PUT", path, [][]any{entry}); err != nil {
		return err
	}
	fmt.Fprintln(r.stdout, confirmation(kind, *key, "deleted"))
	return nil
}

func (r *runner) history(args []string) error {
	f := r.flags("history", "json")
	rf := f.resourceFlags()
	kind := f.String("kind", "", "only `values` or overrides")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	path, err := rf.path("history")
	if err != nil {
		return err
	}
	if *kind != "" {
		path += "?kind=" + url.QueryEscape(*kind)
	}
	rep, err := f.client().do(r.ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	return output(r.stdout, rep.body, *f.format)
}
