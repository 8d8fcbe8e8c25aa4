// Package diagnose checks what a clusterset of mcs-syncer needs of its
// members, for kubectl mcs diagnose: the MCS CRDs served in a version
// mcs-syncer speaks, every version the MCS and mcs-syncer CRDs store still
// served, members' client certificates and tokens not expiring within 7
// days, CoreDNS answering clusterset.local (its Corefile has the multicluster
// plugin, and it may read ServiceImports), pod and service CIDRs that do
// not overlap between members, mcs-syncer running and ready at one version,
// and clocks that agree. Each check passes, fails (with what to do), warns
// (with what to do, without failing), or is skipped (with why: it does not
// apply to how the member is run).
package diagnose
