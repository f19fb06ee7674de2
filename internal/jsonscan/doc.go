// Package jsonscan is the project's one JSON scanner. It reads JSON without
// decoding it: it checks syntax exactly as encoding/json does (json.Valid),
// walks the members of objects and the elements of arrays as byte slices of
// the input, and decodes only the strings a caller asks for. The Chef parser
// finds a few fields in a multi-megabyte converge message and passes the rest
// through untouched, invalid UTF-8 included; the Ansible parser reads an
// event's routing fields and cuts its event_id; ConfigDB merges documents
// member by member without decoding their values.
//
// Nothing here allocates while scanning; the slices it returns alias the
// input, which callers must not modify. It must not grow into a general JSON
// library: it has what those callers need, and is fuzzed against
// encoding/json for every function that has an encoding/json equivalent.
package jsonscan
