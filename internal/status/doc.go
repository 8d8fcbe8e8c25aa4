// Package status reports a clusterset as its members hold it, for
// kubectl-mcs status: each member (does it answer, how many ServiceExports
// and ServiceImports it holds, its health as mcs-syncer sees it); each
// exported Service with the clusters that export it, the exports that are
// not Ready and the conflicts; and, per consumer, its ServiceImport
// (clusterset IP, status.clusters) and the endpoints imported from each
// source against those the source's EndpointSlices hold now. What is not
// converged is listed as problems: the command exits non-zero on any.
//
// The imports are compared on what the members' API servers hold, as a
// user of the clusterset sees them, whichever mode mcs-syncer runs in.
// Only the members' health (up, held, silent, down), heartbeats and
// versions come from mcs-syncer itself: the /members view of each leading
// mcs-syncer read (internal/membership's View).
package status
