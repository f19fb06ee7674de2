// Package configcli is `bridge configdb ...` (also `bridge config`): the fuel2 config commands (get,
// set, override, del, rm-override, and env, comp, def, lvl to manage
// environments, components, resource definitions and levels) plus history,
// against a ConfigDB API given by URL and token, from flags or environment.
//
// Unlike tuning-box's client, every 4xx or 5xx answer is an error: the
// command prints the server's message and exits non-zero.
//
// It only speaks HTTP to the API; it must not import the store.
package configcli
