// Command e2e is the end-to-end benchmark of mcs-syncer: it brings up the
// testbed (real kube-apiservers, audit logs on), runs mcs-syncer as a real
// process in central mode, and measures it against floors measured in the
// same run:
//
//   - latency scenarios (1 service at 2 and 10 changes/s, 10 services at 100
//     and at 10 changes/s, and 10 changes/s over 100 services of the scale
//     scenario):
//     a change updates one endpoint of a hand-written source slice in east,
//     with its last-change-trigger-time set just before the write; its
//     latency runs until the bench's watch in west sees the imported slice
//     carry it. The floor is a raw relay, its changes interleaved with
//     mcs-syncer's: update a slice in east, watch it in east, get and update
//     a mirror slice in west, watch that in west;
//   - scale: N Services x M endpoints exported from east and west, imported
//     into east, west and north, timed from mcs-syncer's start until every
//     consumer holds every import, next to a plain concurrent client writing
//     the same objects into the same consumers;
//   - restart and idle: the writes mcs-syncer makes when it restarts over
//     the scale scenario's imports, and while nothing changes;
//   - return: west's API server stopped until mcs-syncer reports it
//     disconnected, then started; a Service exported from west at once is
//     timed until its slice is in north (the member-return time; 3 outages,
//     1 with -quick).
//
// Writes are counted from the kube-apiservers' audit logs (mcs-syncer's user
// agent); CPU and memory from /proc. It prints one table, writes every
// latency sample to samples.csv and draws the latency CDFs (floor against
// mcs-syncer) into latency-cdf.png.
//
//	go run ./e2e [-quick] [-services 1000] [-scenarios lat2,lat10,lat100,churn10,scale,restart,idle,churn,return]
//
// (make bench-e2e). -quick runs every scenario small and short: a smoke
// test of the program, which fails only when a scenario could not be
// measured, never on a figure.
package main
