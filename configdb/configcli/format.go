package configcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"
)

// decodeJSON parses a JSON answer, numbers kept as written.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	return v, nil
}

// output prints a JSON answer as json (indented), yaml, or plain (strings as
// they are, null as nothing, anything else as JSON).
func output(w io.Writer, body []byte, format string) error {
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	switch format {
	case "plain":
		switch s := v.(type) {
		case string:
			_, err = fmt.Fprintln(w, s)
			return err
		case nil:
			return nil
		}
		fallthrough
	case "json":
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err = w.Write(out.Bytes())
		return err
	case "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(yamlNode(v)); err != nil {
			return err
		}
		return enc.Close()
	case "table":
		return table(w, v)
	}
	return fmt.Errorf("unknown format %q: use table, json, yaml or plain", format)
}

// outputKey prints one key's value as fuel2 config get --key does: the
// mapping {key: value}, so YAML reads "<key>: <value>" and JSON
// {"<key>": <value>}, the value keeping its type.
func outputKey(w io.Writer, key string, body []byte, format string) error {
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	if format == "table" {
		return table(w, map[string]any{key: v})
	}
	b, err := json.Marshal(map[string]json.RawMessage{key: body})
	if err != nil {
		return err
	}
	return output(w, b, format)
}

// table prints an array of objects as rows under their keys, an object as
// key/value rows (as fuel2's cliff tables do), and anything else plain.
// Values that are not strings are shown as compact JSON.
func table(w io.Writer, v any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	switch t := v.(type) {
	case []any:
		var cols []string
		seen := map[string]bool{}
		for _, item := range t {
			if m, ok := item.(map[string]any); ok {
				for _, k := range sortedKeys(m) {
					if !seen[k] {
						seen[k] = true
						cols = append(cols, k)
					}
				}
			}
		}
		if len(cols) == 0 {
			for _, item := range t {
				fmt.Fprintln(tw, cell(item))
			}
			return tw.Flush()
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, item := range t {
			m, _ := item.(map[string]any)
			row := make([]string, len(cols))
			for i, c := range cols {
				if val, ok := m[c]; ok {
					row[i] = cell(val)
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	case map[string]any:
		fmt.Fprintln(tw, "key\tvalue")
		for _, k := range sortedKeys(t) {
			fmt.Fprintf(tw, "%s\t%s\n", k, cell(t[k]))
		}
	default:
		fmt.Fprintln(tw, cell(t))
	}
	return tw.Flush()
}

// sortedKeys puts id and name first, as fuel2's tables do, then the rest
// in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		switch k {
		case "id":
			return 0
		case "name":
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func cell(v any) string {
	switch t := v.(type) {
	case string:
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(t)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// yamlNode builds a YAML tree from decoded JSON, keeping numbers as written
// and mapping keys sorted.
func yamlNode(v any) *yaml.Node {
	switch t := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, yamlNode(t[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, item := range t {
			n.Content = append(n.Content, yamlNode(item))
		}
		return n
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

// readDocument reads one document from stdin in json or yaml, as a JSON value.
func readDocument(r io.Reader, format string, stderr io.Writer) (any, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return parseValue(data, format, stderr)
}

// parseValue parses text as json or yaml into a JSON value.
func parseValue(data []byte, format string, stderr io.Writer) (any, error) {
	switch format {
	case "json":
		v, err := decodeJSON(data)
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		return v, nil
	case "yaml":
		dec := yaml.NewDecoder(bytes.NewReader(data))
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
			return nil, fmt.Errorf("not YAML: %w", err)
		}
		var extra any
		if dec.Decode(&extra) == nil && stderr != nil {
			fmt.Fprintln(stderr, "warning: the YAML stream holds more than one document; only the first is used")
		}
		return jsonable(v), nil
	}
	return nil, fmt.Errorf("unknown format %q: use json or yaml", format)
}

// jsonable turns YAML's decoded values into JSON's: maps with keys of any
// type become maps with string keys. It cannot fail.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, item := range t {
			t[k] = jsonable(item)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, item := range t {
			m[fmt.Sprint(k)] = jsonable(item)
		}
		return m
	case []any:
		for i, item := range t {
			t[i] = jsonable(item)
		}
	}
	return v
}
