// Package strictyaml decodes a YAML configuration file into Go structs
// strictly: unknown keys, wrong types, unset environment variables,
// unreadable secret files and validation problems are all reported at once,
// each naming its dotted key path ("broker.listeners[1].tls.cert_file").
//
// It uses go.yaml.in/yaml/v3 only to parse the document into a node tree,
// then walks that tree against the target with reflect, so that every
// message names a key rather than a Go type.
//
// What a config author can write:
//
//   - ${VAR} and ${VAR:-default} in any scalar value (not in keys). An unset
//     ${VAR} without a default is an error; the default is used when VAR is
//     unset or empty. $${ is a literal ${, and any other $ is kept as is.
//   - <name>_file instead of <name> for a field tagged secret:"true"; the
//     file's content, minus one trailing newline, becomes the value.
//   - Anchors, aliases and merge keys (<<).
//   - true and false (any case) for booleans; yes, no, on and off are
//     refused. Durations need a unit ("10s").
//
// What a Go implementer provides:
//
//   - yaml:"name" struct tags (yaml:"-" skips a field, yaml:",inline"
//     merges a struct's keys into its parent); secret:"true" on fields that
//     may come from a file.
//   - SetDefaults() on a pointer receiver, called on every slice element,
//     map value and pointer that Decode allocates, before it is decoded.
//   - Validate() error, called after decoding on every value in the tree,
//     children before parents; Problems helps to write it.
//   - Union, for a mapping whose keys are one of several types, chosen by
//     the value of one key.
//
// The package must not know about any particular configuration, keep global
// state, log, or silently skip anything it does not understand. Decode is
// safe to call from several goroutines at once.
package strictyaml
