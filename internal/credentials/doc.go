// Package credentials runs the exec credential plugins
// (client.authentication.k8s.io) of the members' client configs with a
// deadline.
//
// client-go runs a config's plugin itself, with no timeout and no way to
// cancel it: a plugin that never returns holds every request of the
// member, its probe and mcs-syncer's shutdown forever, and what the plugin
// writes to stderr goes to the process's stderr, not into the member's
// cause. Plugins.Configure takes the plugin out of a rest.Config and gives
// the config credentials from a Plugin instead: each run is bounded by a
// timeout and killed past it (its process group with it), concurrent
// requests share one run, a request waits for it no longer than its own
// context allows, and a failure names the plugin, its exit status and the
// end of its stderr. The credentials (a bearer token, a client
// certificate, or both) are kept until they expire or a request is
// answered 401, as client-go keeps them.
package credentials
