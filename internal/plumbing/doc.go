// Package plumbing is the controller plumbing that the export, import and
// publish sides share, kept apart from the clusterset's rules
// (internal/clusterset):
//
//   - NewController, NewControllerWithBackoff: a member's unmanaged
//     controllers, with mcs-syncer's queue and failure backoff;
//     StoreSource, the watch source of the export Store's changes.
//   - NonBlockingRecorder: events that never hold up a reconcile.
//   - StripUnread: the cache transform that drops what is never read;
//     Keys: one copy of each well-known label key in objects cached by the
//     thousand.
//   - Routine, ConflictRetry: which reconcile errors are routine (a
//     resourceVersion conflict, a shutdown) and are retried without an
//     error log.
//   - WithFailureReporter, ReportFailure: a member's controllers tell
//     membership of the API server's failures to serve their writes.
//   - OwnWrites, Latest: mcs-syncer's last write of each object it writes
//     whole, so that its echo triggers nothing and a cache behind it is
//     read as the write.
package plumbing
