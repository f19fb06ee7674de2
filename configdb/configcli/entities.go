package configcli

import (
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// entityName is how fuel2 names each kind in its confirmations.
var entityName = map[string]string{"env": "Environment", "comp": "Component", "def": "Resource_definition"}

// entity serves env, comp, def and lvl.
func (r *runner) entity(kind, verb string, args []string) error {
	base := map[string]string{"env": "/environments", "comp": "/components", "def": "/resource_definitions"}[kind]
	if kind == "lvl" {
		return r.levels(verb, args)
	}
	switch verb {
	case "list":
		f := r.flags(kind+" list", "json")
		var component *string
		if kind == "def" {
			component = f.String("component-id", "", "only definitions of this component `ID` (\"\" for none)")
		}
		if _, err := f.parse(args, 0); err != nil {
			return err
		}
		path := base
		if component != nil && isSet(f, "component-id") {
			path += "?component_id=" + url.QueryEscape(*component)
		}
		return r.show(f, path)
	case "show":
		f := r.flags(kind+" show", "json")
		id, err := f.parseOneID(args)
		if err != nil {
			return err
		}
		return r.show(f, base+"/"+id)
	case "delete":
		f := r.flags(kind+" delete", "")
		id, err := f.parseOneID(args)
		if err != nil {
			return err
		}
		if _, err = f.client().do(r.ctx, "DELETE", base+"/"+id, nil); err != nil {
			return err
		}
		fmt.Fprintf(r.stdout, "%s with id %s was deleted\n", entityName[kind], id)
		return nil
	case "create", "update":
		switch kind {
		case "env":
			return r.envWrite(verb, args)
		case "comp":
			return r.compWrite(verb, args)
		default:
			return r.defWrite(verb, args)
		}
	}
	return usageErrorf("unknown subcommand %q: use list, show, create, update or delete", verb)
}

func isSet(f *flags, name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

func parseID(s string) (string, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err != nil || n <= 0 {
		return "", usageErrorf("%q is not an id", s)
	}
	return s, nil
}

// show GETs path and prints it.
func (r *runner) show(f *flags, path string) error {
	rep, err := f.client().do(r.ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	return output(r.stdout, rep.body, *f.format)
}

// commaList splits a,b,c; "" and "[]" are the empty list.
func commaList(s string) []string {
	if s == "" || s == "[]" {
		return []string{}
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// idsOrNames turns "1,fuel" into [1, "fuel"]: components by id or name.
func idsOrNames(s string) []any {
	out := []any{}
	for _, p := range commaList(s) {
		if n, err := strconv.ParseInt(p, 10, 64); err == nil {
			out = append(out, n)
		} else {
			out = append(out, p)
		}
	}
	return out
}

func (r *runner) envWrite(verb string, args []string) error {
	f := r.flags("env "+verb, "json")
	id := f.Int64("id", 0, "environment `ID` to create (Fuel's cluster id); default the next free one")
	components := f.String("components", "", "components, comma-separated `ids or names`")
	levels := f.String("levels", "", "hierarchy `levels`, comma-separated, least specific first")
	pos, err := f.parseWrite(verb, args)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if verb == "create" {
		if *id > 0 {
			body["id"] = *id
		}
		body["components"] = idsOrNames(*components)
		body["hierarchy_levels"] = commaList(*levels)
		return r.create(f, "/environments", body)
	}
	envID, err := parseID(pos[0])
	if err != nil {
		return err
	}
	if isSet(f, "components") {
		body["components"] = idsOrNames(*components)
	}
	if isSet(f, "levels") {
		body["hierarchy_levels"] = commaList(*levels)
	}
	return r.update(f, "env", "/environments/", envID, body)
}

// create posts body to path and prints what the server made of it.
func (r *runner) create(f *flags, path string, body any) error {
	rep, err := f.client().do(r.ctx, "POST", path, body)
	if err != nil {
		return err
	}
	return output(r.stdout, rep.body, *f.format)
}

// update patches the entity (env, comp, def) at path+id and confirms it.
func (r *runner) update(f *flags, entity, path, id string, body map[string]any) error {
	if _, err := f.client().do(r.ctx, "PATCH", path+id, body); err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "%s with id %s was updated\n", entityName[entity], id)
	return nil
}

func (r *runner) compWrite(verb string, args []string) error {
	f := r.flags("comp "+verb, "json")
	name := f.String("name", "", "component `name`")
	defs := f.String("resource-definitions", "", "create: resource definition `names`; update: the ids it keeps ([] for none)")
	pos, err := f.parseWrite(verb, args)
	if err != nil {
		return err
	}
	if verb == "create" {
		if *name == "" {
			return usageErrorf("--name is required")
		}
		list := []any{}
		for _, d := range commaList(*defs) {
			list = append(list, map[string]any{"name": d})
		}
		return r.create(f, "/components", map[string]any{"name": *name, "resource_definitions": list})
	}
	compID, err := parseID(pos[0])
	if err != nil {
		return err
	}
	body := map[string]any{}
	if isSet(f, "name") {
		body["name"] = *name
	}
	if isSet(f, "resource-definitions") {
		list := []any{}
		for _, d := range commaList(*defs) {
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return usageErrorf("--resource-definitions takes ids on update, not %q", d)
			}
			list = append(list, map[string]any{"id": n})
		}
		body["resource_definitions"] = list
	}
	return r.update(f, "comp", "/components/", compID, body)
}

func (r *runner) defWrite(verb string, args []string) error {
	f := r.flags("def "+verb, "json")
	name := f.String("name", "", "resource definition `name`, such as astute or override/plugins")
	component := f.Int64("component-id", 0, "component `ID`")
	content := f.String("content", "", "the definition's `content`, read as --type says")
	typ := f.String("type", "", "type of --content: json or yaml")
	dataFormat := f.String("data-format", "", "format of the content on stdin: json or yaml")
	pos, err := f.parseWrite(verb, args)
	if err != nil {
		return err
	}
	body := map[string]any{}
	switch {
	case isSet(f, "content") && *dataFormat != "":
		return usageErrorf("--data-format is for stdin; with --content give --type")
	case isSet(f, "content"):
		if *typ != "json" && *typ != "yaml" {
			return usageErrorf("give --type json or yaml for --content")
		}
		v, err := parseValue([]byte(*content), *typ, r.stderr)
		if err != nil {
			return usageErrorf("--content: %v", err)
		}
		body["content"] = v
	case *dataFormat != "":
		if *typ != "" {
			return usageErrorf("--type and --data-format can't be used together")
		}
		v, err := readDocument(r.stdin, *dataFormat, r.stderr)
		if err != nil {
			return usageErrorf("stdin: %v", err)
		}
		body["content"] = v
	}
	if isSet(f, "component-id") {
		body["component_id"] = *component
	}
	if verb == "create" {
		if *name == "" {
			return usageErrorf("--name is required")
		}
		body["name"] = *name
		return r.create(f, "/resource_definitions", body)
	}
	if isSet(f, "name") {
		body["name"] = *name
	}
	defID, err := parseID(pos[0])
	if err != nil {
		return err
	}
	return r.update(f, "def", "/resource_definitions/", defID, body)
}

// levels serves lvl list and lvl show.
func (r *runner) levels(verb string, args []string) error {
	f := r.flags("lvl "+verb, "json")
	env := f.Int64("env", 0, "environment `ID` (required)")
	switch verb {
	case "list":
		if _, err := f.parse(args, 0); err != nil {
			return err
		}
		if *env <= 0 {
			return usageErrorf("--env is required")
		}
		return r.show(f, "/environments/"+strconv.FormatInt(*env, 10)+"/hierarchy_levels")
	case "show":
		pos, err := f.parse(args, 1)
		if err != nil {
			return err
		}
		if *env <= 0 {
			return usageErrorf("--env is required")
		}
		return r.show(f, "/environments/"+strconv.FormatInt(*env, 10)+"/hierarchy_levels/"+url.PathEscape(pos[0]))
	}
	return usageErrorf("unknown subcommand %q: use list or show", verb)
}
