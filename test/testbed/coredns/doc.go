// Package coredns runs a testbed cluster's CoreDNS: authoritative for
// cluster.local from the cluster's Services and for clusterset.local from
// its ServiceImports (the kubernetes plugin's multicluster option), on a
// loopback port and, for real nodes, behind a kube-dns Service. Lookup
// asks one for a name's A records.
package coredns
