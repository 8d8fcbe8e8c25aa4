// Package testbed starts a local clusterset of real Kubernetes control planes
// for tests, benchmarks and the demo: no containers, no Docker engine.
//
// It is the facade of a tree of packages: controlplane (kwokctl's control
// planes, fake nodes, CRDs, clients), realnode (real nodes and their
// network), coredns, syncer (mcs-syncer as a process), workloads (the
// objects tests create) and host (ports, processes, polling). Start puts a
// control plane, a CoreDNS and optionally a real node together into each
// Cluster; tests need nothing else to reach them.
//
// Each member cluster is started by kwokctl's binary runtime from the binaries
// that hack/tools/build.sh builds (kube-apiserver, kube-controller-manager,
// kube-scheduler and etcd of Kubernetes v1.36.3, kwok), so API validation,
// watches, resourceVersion conflicts, garbage collection and the
// EndpointSlice controller are the real ones. kwok plays the kubelets of
// the fake nodes that carry scale: pods that become Running and Ready with
// an IP, but run nothing.
//
// With Options.RealNodes each cluster also gets a real node
// (realnode.Node): a kubelet, containerd, runc, the CNI bridge and
// kube-proxy in a network namespace of its own, its pod CIDR routed from
// every other cluster's node, CoreDNS behind a kube-dns Service as the
// pods' DNS, and the images of package images. Pods placed there
// (realnode.Place, workloads.ServerPodSpec, workloads.ClientPod) run,
// answer and can be Exec'd into: the data plane the e2e tests and the demo
// use. docs/testbed.md explains the design.
//
// What the testbed guarantees, per cluster (see Cluster):
//   - distinct, non-overlapping pod and service CIDRs (cluster i of the
//     clusterset gets pods from 10.(100+i).0.0/16 and services from
//     10.(200+i).0.0/16), so addresses tell which cluster they came from;
//   - fake nodes labelled topology.kubernetes.io/zone, in at least two zones
//     ("<cluster>-a", "<cluster>-b", ...), each with its own slice of the pod
//     CIDR;
//   - the MCS CRDs of sigs.k8s.io/mcs-api (v1beta1 stored, v1alpha1 served);
//   - a CoreDNS on a loopback port (and the nodes' bridge, with real nodes),
//     authoritative for cluster.local and clusterset.local, with the
//     kubernetes plugin's multicluster option.
//
// Everything lives in one state folder: kwokctl's work directories, each
// cluster's kubeconfig, the clusterset config file that mcs-syncer reads,
// CoreDNS's Corefile, pid files and logs. The user's ~/.kube/config and
// ~/.kwok are never touched. Stop (or `testbed down`) stops every process of
// the testbed and removes the state folder; with Options.TeardownOnExit a
// watchdog process does the same if the process that called Start dies
// without calling Stop (a panic, a test timeout, SIGKILL), so nothing is
// left behind.
package testbed
