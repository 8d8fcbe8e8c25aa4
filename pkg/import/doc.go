// Package imports (directory pkg/import; import is a Go keyword) will hold
// the import controller that runs once per consumer cluster: ServiceImports,
// derived Services for clusterset IPs, and the imported EndpointSlices,
// written through pkg/reconciler.
//
// It is filled by the import issue; nothing here yet.
package imports
