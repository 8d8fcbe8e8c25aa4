// Package status reports a clusterset as its members hold it, for
// kubectl-mcs status: each member (does it answer, how many ServiceExports
// and ServiceImports it holds); each exported Service with the clusters
// that export it, the exports that are not Ready and the conflicts; and,
// per consumer, its ServiceImport (clusterset IP, status.clusters) and the
// endpoints imported from each source against those the source's
// EndpointSlices hold now. What is not converged is listed as problems:
// the command exits non-zero on any.
//
// It reads the members' API servers only, never mcs-syncer: the report is
// what a user of the clusterset sees, whichever mode mcs-syncer runs in.
package status
