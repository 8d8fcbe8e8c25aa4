// Package audit counts mcs-syncer's writes from the testbed's API server
// audit logs: the policy that logs every write to the kinds mcs-syncer
// writes (Policy, WritePolicy for testbed.Options.AuditPolicy), and
// CountWrites, which counts, by kind and verb, the writes made with
// mcs-syncer's user agent in a time window. The benchmarks and the e2e
// tests use it: a write the audit log shows is one the API server took.
package audit
