package configcore

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/opsfirehose/firehose/internal/mqttlisteners"
	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Override sets one setting from outside the config file: a command-line
// flag or an environment variable. Overrides are applied to the file's YAML
// before it is decoded, so they are checked exactly as the file is, and a
// problem names the override's Source.
//
// Precedence, highest first: flags, FIREHOSE_* environment variables, the
// file, the defaults.
type Override struct {
	// Key is a dotted config key ("http.address"), or MQTTAddress or
	// WSAddress.
	Key string
	// Value is read as a YAML value: `true`, `8`, `30s`, `[a, b]`; anything
	// else is a string, taken literally (no ${VAR} expansion).
	Value string
	// Source names where it came from: "--http-address" or
	// "FIREHOSE_HTTP_ADDRESS".
	Source string
}

// The broker's listeners are a list, so two keys stand for the listeners
// people mean when they say "the MQTT port" and "the WebSocket port".
const (
	// MQTTAddress is the address of the first plain (no tls) tcp
	// listener; one named "mqtt" is added when there is none. An empty
	// value removes that listener.
	MQTTAddress = "<mqtt listener>.address"
	// WSAddress is the same for the first plain websocket listener ("ws").
	WSAddress = "<websocket listener>.address"
)

// envPrefix starts every environment variable that overrides a key.
const envPrefix = "FIREHOSE_"

// EnvKeys maps each environment variable that overrides a key to its key:
// FIREHOSE_ and the key in upper case with "." as "_", such as
// FIREHOSE_HTTP_ADDRESS for http.address or FIREHOSE_CONFIGDB_DSN_FILE for
// configdb.dsn_file. Every key that holds a value or a list of values is
// there, except under maps and lists of sections (sinks, routes, users,
// tokens, listeners); FIREHOSE_MQTT_ADDRESS and FIREHOSE_WS_ADDRESS set the
// MQTT and WebSocket listeners' addresses.
//
// root is the config file's Go type: each binary has its own.
func EnvKeys(root reflect.Type) map[string]string {
	out := map[string]string{
		envPrefix + "MQTT_ADDRESS": MQTTAddress,
		envPrefix + "WS_ADDRESS":   WSAddress,
	}
	for _, key := range ScalarKeys(root, "") {
		out[EnvName(key)] = key
	}
	return out
}

// EnvName is the environment variable that overrides key.
func EnvName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// EnvOverrides returns the overrides that lookupEnv's FIREHOSE_* variables
// make, sorted by key. Variables that match no key (FIREHOSE_CONFIG,
// FIREHOSE_URL, the ones a config file names in ${...}) are not overrides.
// keys are EnvKeys' answer for the config's type.
func EnvOverrides(keys map[string]string, lookupEnv func(string) (string, bool)) []Override {
	var out []Override
	for name, key := range keys {
		if v, ok := lookupEnv(name); ok {
			out = append(out, Override{Key: key, Value: v, Source: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// ScalarKeys lists the keys under t that hold a value or a list of values.
func ScalarKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, inline, ok := strictyaml.FieldKey(sf)
		if !ok {
			continue
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if inline {
			keys = append(keys, ScalarKeys(ft, prefix)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		switch {
		case isValue(ft):
			keys = append(keys, key)
			if sf.Tag.Get("secret") == "true" {
				keys = append(keys, key+"_file")
			}
		case ft.Kind() == reflect.Slice && isValue(ft.Elem()):
			keys = append(keys, key)
		case ft.Kind() == reflect.Struct:
			keys = append(keys, ScalarKeys(ft, key)...)
		}
	}
	return keys
}

func isValue(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// applyOverrides returns the YAML document data with the overrides set,
// and which source set each key path, so that problems can name it.
func applyOverrides(data []byte, ovs []Override) ([]byte, Sources, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// The file does not parse: decoding it reports why, by line.
		return data, nil, nil
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if isNullNode(root) {
		*root = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	sources := Sources{}
	var errs []error
	for _, o := range ovs {
		var path string
		var err error
		switch o.Key {
		case MQTTAddress:
			path, err = setListenerAddress(root, mqttlisteners.TCP, "mqtt", o.Value)
		case WSAddress:
			path, err = setListenerAddress(root, mqttlisteners.WebSocket, "ws", o.Value)
		default:
			path, err = o.Key, setKey(root, strings.Split(o.Key, "."), valueNode(o.Value))
		}
		if err != nil {
			errs = append(errs, &strictyaml.KeyError{Key: o.Key, Err: fmt.Errorf("%s: %w", o.Source, err)})
			continue
		}
		if path != "" {
			sources[path] = o.Source
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, nil, fmt.Errorf("applying %s: %w", ovs[0].Source, err)
	}
	return out, sources, nil
}

func isNullNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// mapping returns n as a mapping to write into: an alias is followed, and a
// null becomes an empty mapping.
func mapping(n *yaml.Node) (*yaml.Node, bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNullNode(n) {
		*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	return n, n.Kind == yaml.MappingNode
}

// setKey sets path under the mapping m to value, creating mappings on the
// way. A secret's other form (x and x_file) is removed, so the override wins
// over whichever the file gave.
func setKey(m *yaml.Node, path []string, value *yaml.Node) error {
	m, ok := mapping(m)
	if !ok {
		return fmt.Errorf("cannot set it: the config file has a %s there, not a mapping", kindName(m))
	}
	key := path[0]
	if len(path) == 1 {
		other := key + "_file"
		if k, ok := strings.CutSuffix(key, "_file"); ok {
			other = k
		}
		removeKey(m, other)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		if len(path) == 1 {
			m.Content[i+1] = value
			return nil
		}
		return setKey(m.Content[i+1], path[1:], value)
	}
	child := value
	if len(path) > 1 {
		child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
	if len(path) > 1 {
		return setKey(child, path[1:], value)
	}
	return nil
}

func removeKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "value"
	}
	return "node"
}

// valueNode reads an override's value as YAML: a scalar keeps its plain
// resolution (true, 8, 30s), a flow list is a list, and anything else is a
// string. "${" is escaped, as a value from outside is never expanded.
func valueNode(v string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(v), &doc); err == nil && len(doc.Content) == 1 {
		n := doc.Content[0]
		switch {
		case n.Kind == yaml.ScalarNode && n.Value == strings.TrimSpace(v):
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: n.Tag, Value: strings.ReplaceAll(n.Value, "${", "$${")}
		case n.Kind == yaml.SequenceNode && n.Style&yaml.FlowStyle != 0:
			for _, item := range n.Content {
				item.Value = strings.ReplaceAll(item.Value, "${", "$${")
			}
			return n
		}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.ReplaceAll(v, "${", "$${")}
}

// setListenerAddress sets the address of the first listener of type typ
// without tls in broker.listeners, which is first filled with the defaults
// when the file has none; with no such listener one named name is added.
// An empty address removes the listener. It returns the listener's key
// path, or "" for a removal (no key is left to name).
func setListenerAddress(root *yaml.Node, typ, name, address string) (string, error) {
	b := findOrAdd(root, "broker", &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	b, ok := mapping(b)
	if !ok {
		return "", fmt.Errorf("cannot set it: broker is a %s in the config file", kindName(b))
	}
	ls := findOrAdd(b, "listeners", defaultListeners())
	for ls.Kind == yaml.AliasNode && ls.Alias != nil {
		ls = ls.Alias
	}
	if isNullNode(ls) {
		*ls = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	}
	if ls.Kind != yaml.SequenceNode {
		return "", fmt.Errorf("cannot set it: broker.listeners is a %s in the config file, not a list", kindName(ls))
	}
	for i, item := range ls.Content {
		l, ok := mapping(item)
		if !ok {
			continue
		}
		lt, hasTLS := mqttlisteners.TCP, false
		for j := 0; j+1 < len(l.Content); j += 2 {
			switch l.Content[j].Value {
			case "type":
				lt = l.Content[j+1].Value
			case "tls":
				hasTLS = !isNullNode(l.Content[j+1])
			}
		}
		if lt != typ || hasTLS {
			continue
		}
		if address == "" {
			ls.Content = append(ls.Content[:i], ls.Content[i+1:]...)
			return "", nil // nothing left to name: the index is the next listener's now
		}
		return fmt.Sprintf("broker.listeners[%d].address", i), setKey(l, []string{"address"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: address})
	}
	if address == "" {
		return "", nil
	}
	ls.Content = append(ls.Content, listenerNode(name, typ, address))
	return fmt.Sprintf("broker.listeners[%d].address", len(ls.Content)-1), nil
}

func findOrAdd(m *yaml.Node, key string, def *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, def)
	return def
}

func defaultListeners() *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, l := range mqttlisteners.Defaults() {
		seq.Content = append(seq.Content, listenerNode(l.Name, l.Type, l.Address))
	}
	return seq
}

func listenerNode(name, typ, address string) *yaml.Node {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		str("name"), str(name), str("type"), str(typ), str("address"), str(address),
	}}
}

// Sources maps each key path an override set ("broker.listeners[0].address")
// to the override's Source ("--mqtt-address").
type Sources map[string]string

// Name rewrites the problems in err at keys an override set
// (strictyaml.KeyErrors, joined or alone) so that they name the override:
// "http.address (from --http-address): ...". Config problems pass through
// it when the file is loaded; the command line passes a start-up error
// through it too (a port in use), with the sources the load kept.
func (sources Sources) Name(err error) error {
	if err == nil || len(sources) == 0 {
		return err
	}
	var out []error
	for _, e := range flatten(err) {
		var ke *strictyaml.KeyError
		if errors.As(e, &ke) {
			for key, src := range sources {
				if ke.Key == key || strings.HasPrefix(ke.Key, key+".") || strings.HasPrefix(ke.Key, key+"[") || ke.Key+"_file" == key || key+"_file" == ke.Key {
					e = &strictyaml.KeyError{Key: ke.Key + " (from " + src + ")", Line: ke.Line, Err: ke.Err}
					break
				}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func flatten(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range u.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
