// Package membership is the runtime side of a clusterset's membership:
// which clusters are members now, and the life of mcs-syncer's connection
// to each.
//
//   - Config: the membership file (LoadConfig). Only its structure can make
//     it invalid; a member whose kubeconfig cannot be read is that member's
//     problem, reported and retried while the others run.
//   - Set: the members of the config in force, each with a lifecycle of its
//     own. A member is engaged on its own (settings read, API server
//     answering, MCS CRDs served, cache built and synced, then its
//     controllers started) and disengaged on its own (an outage, its CRDs
//     deleted, a refused list or watch): its cache and controllers stop,
//     and it is retried with a bounded backoff, so its view is rebuilt
//     fresh when it returns instead of waiting out client-go's reflector
//     backoff. No member waits for another.
//   - A member's lifecycle (member.go: its state, State in state.go, and
//     its retries) is a supervisor with two seams, the cluster factory and
//     the health check (healthcheck.go; both in deps), which the unit tests
//     replace with fakes to drive every state transition in milliseconds.
//     Each engagement (engagement.go) builds the member's cache, runs its
//     controllers, watches its health (failures.go sorts its cache's
//     failures) and, when it ends, waits for its controllers: for
//     StopTimeout, past which the process is ended (ControllersHung) rather
//     than left with their goroutines.
//   - The members read through a hub (hub.go) share one client and cache
//     of it (one watch of every publication, whatever their number) and
//     one health check whose answer serves all of them; each keeps its own
//     state, engagement and controllers, and the last to stop ends the
//     shared connection.
//   - The config file is polled: a member added is engaged, one removed is
//     disengaged and forgotten, one whose settings or kubeconfig changed is
//     engaged anew; every member that stops is stopped at once, then waited
//     for. Options.Departed cleans up after a member that left, told
//     whether its cluster is still a member under another ID (a rename: the
//     same API server address or kube-system namespace UID) and given a
//     context that ends when the cluster is a member again. A file that no
//     longer parses keeps the last good membership.
//   - A member whose entry leaves out its id is named by its cluster's
//     KEP-2149 ClusterProperty (resolve.go): read in the background, kept
//     while the cluster cannot be read, and the member left out (named on
//     /readyz) until it is known.
//   - Each member's state (engaged, syncing, unreachable, ...) with its
//     cause is exported as metrics and served on /readyz?verbose; the
//     process is ready once no reachable member is still syncing.
//
// internal/clusterset holds the vocabulary this package shares with the export
// and import sides (cluster IDs, the Store); Set implements its Membership.
package membership
