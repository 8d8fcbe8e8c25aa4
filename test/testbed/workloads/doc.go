// Package workloads builds the objects the tests, benchmarks and demo put
// into the testbed's clusters: Deployments and Services that kwok's fake
// nodes run, exported apps, servers on a real node that say which cluster
// and pod answered, a client pod to ask them from, and small readers of
// what the API server holds (ServiceExport conditions, ready endpoints).
package workloads
