// Package benchkit is the machinery the benchmarks under bench/ share that
// has nothing to do with MQTT: starting, watching and stopping the processes
// they measure (built with `go build` from this module), accounting the CPU
// those processes, the load generator and everything else on the machine
// used during a measurement, attaching `perf record`, and the statistics a
// report needs (a fixed-size latency histogram, a bitset of sequence numbers,
// medians) with their formatting.
//
// It is imported only by the benchmark programs; it must not import the
// firehose packages they measure, so that a benchmark measures the binary it
// starts and nothing else (internal/gobuild, which builds those binaries as
// the release does, is no such package).
package benchkit
