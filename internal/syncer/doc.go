// Package syncer assembles one mcs-syncer process from its Settings (what
// cmd/mcs-syncer's flags say): it loads the clusterset config, checks that
// it suits the mode, and wires the parts together in a controller-runtime
// manager: the membership (internal/membership), and for each engaged
// member what runs while it is engaged (Syncer.engage):
//
//   - a member read through its publications (per-cluster mode, another
//     member): a publication reader (internal/publish);
//   - any other member: its export watcher (internal/export), and where
//     mcs-syncer writes (every member in central mode, the local one in
//     per-cluster mode) its import controller (internal/imports) and, in
//     per-cluster mode, its publisher, into its own API server or the hub;
//
// and what is cleaned up when a member leaves the config (Syncer.departed).
// New builds it all and returns a ConfigError for what the user must fix;
// Start runs it.
package syncer
