// Package clusterset will hold the clusterset's shared vocabulary and state:
// cluster IDs, membership (the clusterset config file and one connection per
// member cluster), ExportedService, the in-memory export store, and the pure
// merge and conflict-resolution rules of KEP-1645.
//
// It is filled by the export issue; nothing here yet.
package clusterset
