// Command tokenplugin is the testbed's exec credential plugin (client-go's
// ExecCredential, client.authentication.k8s.io/v1), of the kind that
// KEP-4322 (its credential plugins, once KEP-5339) has a consumer of ClusterProfiles run: given the cluster it is
// asked for (KUBERNETES_EXEC_INFO, with provideClusterInfo), it reads the
// bearer token of that cluster from a Secret of the inventory cluster and
// prints it.
//
// The Secret is named by the cluster's config, the content of the
// client.authentication.k8s.io/exec extension of the ClusterProfile's
// access provider: {"secret": "<namespace>/<name>"}; its key "token"
// holds the token. The inventory cluster is reached through the
// kubeconfig at $TOKENPLUGIN_KUBECONFIG. Each run is appended to
// $TOKENPLUGIN_LOG, if set, as "<server> <namespace>/<secret>
// args=<its arguments, comma-separated>", so that a test can tell the
// plugin was used, and with which arguments (those a profile's
// exec/additional-args extension adds).
package main
