// Package httpserver is the bridge's HTTP front door: one listener for the
// intake endpoints that adapters register, health checks and metrics. It owns
// what every endpoint shares: TLS, token checking in constant time, JSON error
// bodies, Retry-After answers, and request metrics by route and status.
//
// It must not know any source's payloads; those belong to adapters/<source>.
package httpserver
