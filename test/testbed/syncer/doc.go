// Package syncer builds mcs-syncer and runs it as a real process for the
// e2e tests, the benchmarks and the demo: free metrics and probe ports,
// its log in a file, /readyz waited for, a graceful stop (SIGTERM) or a
// kill, and its /metrics read with Prometheus's own text parser.
package syncer
