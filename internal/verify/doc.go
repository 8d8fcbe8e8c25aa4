// Package verify checks a clusterset's data path with real traffic, as
// `kubectl mcs verify` does: from a short-lived client Pod in a consumer
// cluster, the clusterset name of each imported Service is resolved and
// its clusterset IP connected to, and the endpoints each exporting
// cluster contributed are connected to one by one, so that the report
// says which clusters answered against which export the Service.
//
// The package has three parts that meet only through plain values: Plan
// turns what the consumer's API server holds (a ServiceImport and its
// imported EndpointSlices, as a Target) into Checks; Probe runs Checks
// inside the client Pod (mcs-syncer's image, `mcs-syncer probe`) and
// prints a Result per check as a JSON line; Evaluate reads the Results
// against the Target into a Report. Only TCP ports are connected to (a
// UDP or SCTP port has no answer to count on); a headless Service has no
// clusterset IP, so its name must resolve to imported endpoints instead.
package verify
