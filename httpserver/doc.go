// Package httpserver is the bridge's HTTP front door: one listener for the
// intake endpoints that adapters register, health checks and metrics. It owns
// what every endpoint shares: TLS, token checking in constant time, JSON error
// bodies, Retry-After answers, reading bodies in memory that grows with the
// bytes that arrive, lingering after an early answer so that the client
// reads it, and request metrics by route and status. README.md holds the
// HTTP intake's security model: every limit and the attacks it answers.
//
// It must not know any source's payloads; those belong to adapters/<source>.
package httpserver
