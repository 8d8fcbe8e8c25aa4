// Package realnode runs the testbed's real nodes: for each cluster a
// kubelet, containerd, runc, the CNI bridge and kube-proxy in a network
// namespace of its own, with the images of package images imported (no
// registry is reachable), joined to the other clusters' nodes by one
// bridge on the host so that pod IPs route between clusters. Pods that
// Place puts there run, answer and can be exec'd into.
//
// Every name a node uses (bridge, namespaces, cgroups) carries a hash of
// the testbed's state folder, so that the testbed's teardown finds what a
// crashed run left from the folder alone. Needs root and the Debian
// packages that CheckHost names.
package realnode
