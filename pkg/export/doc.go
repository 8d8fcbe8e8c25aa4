// Package export will hold the export watcher that runs once per member
// cluster: it turns ServiceExports, their Services and EndpointSlices into
// clusterset.ExportedService values, and writes ServiceExport status (Valid,
// Ready, Conflict).
//
// It is filled by the export issue; nothing here yet.
package export
