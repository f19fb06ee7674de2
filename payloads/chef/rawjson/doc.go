// Package rawjson reads JSON without decoding it: it checks syntax exactly as
// encoding/json does (json.Valid), walks the members of objects and the
// elements of arrays as byte slices of the input, and decodes only the strings
// a caller asks for. The Chef adapter uses it to find a few fields in a
// multi-megabyte converge message and pass the rest through untouched,
// invalid UTF-8 included.
//
// Nothing here allocates while scanning; the slices it returns alias the
// input, which callers must not modify. It must not grow into a general JSON
// library: it has what the Chef adapter needs, and is fuzzed against
// encoding/json for every function that has an encoding/json equivalent.
package rawjson
