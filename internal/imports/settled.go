package imports

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// settled remembers, per import and source cluster, the inputs under
// which the source's slices were last found up to date (a plan with
// nothing to write), so that a change of one source does not plan the
// others again. An import of 252 sources planned all of them for each
// change of one, and its importer fell tens of seconds behind a hub load
// of 50 changes a second (make bench-scale); now a change costs the
// planning of the source that changed.
type settled struct {
	mu sync.Mutex
	m  map[types.NamespacedName]settledSources
}

// settledSources is what settled knows of one import. Reconciles of one
// import never run at once (the workqueue's rule), so its map is only
// ever used by one at a time: a reconcile looks the import up once, not
// once per source (1,000 at make bench-scale's largest).
type settledSources map[clusterset.ClusterID]settledInputs

// settledInputs are what a source's slices are planned from: the export
// (the Store's, replaced on every change, never modified), what the
// import gives every source (sharedInputs), and the slices held (a hash
// of their names and resourceVersions: ours written since, or anyone's
// change, differ).
type settledInputs struct {
	export *clusterset.ExportedService
	shared string
	slices uint64
}

func newSettled() *settled {
	return &settled{m: map[types.NamespacedName]settledSources{}}
}

// of returns what is known of import key's sources, to read and record
// for the length of one reconcile.
func (s *settled) of(key types.NamespacedName) settledSources {
	s.mu.Lock()
	defer s.mu.Unlock()
	known := s.m[key]
	if known == nil {
		known = settledSources{}
		s.m[key] = known
	}
	return known
}

// same reports whether source's slices were found up to date under in.
func (k settledSources) same(source clusterset.ClusterID, in settledInputs) bool {
	last, ok := k[source]
	return ok && last == in
}

// record notes that source's slices are up to date under in, or
// (upToDate false) that they may not be.
func (k settledSources) record(source clusterset.ClusterID, in settledInputs, upToDate bool) {
	if upToDate {
		k[source] = in
	} else {
		delete(k, source)
	}
}

// forget drops what is known of import key.
func (s *settled) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// sharedInputs is what an import gives the planning of each source's
// slices besides its export and slices: the owner, the slices' labels, the
// ports that expose an export, the address types and the traffic
// distribution.
func sharedInputs(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, addressTypes []discoveryv1.AddressType) string {
	var b strings.Builder
	b.WriteString(string(si.UID) + "\x00" + si.Name + "\x00" + string(merged.Spec.Type) + "\x00" + ptr.Deref(merged.Spec.TrafficDistribution, "") + "\x00")
	for _, t := range addressTypes {
		b.WriteString(string(t) + ",")
	}
	for _, p := range merged.Spec.Ports {
		b.WriteString("\x00" + p.Name + "/" + string(p.Protocol) + "/" + strconv.Itoa(int(p.Port)) + "/" + ptr.Deref(p.AppProtocol, ""))
	}
	return b.String()
}

// heldSlices identifies the slices held by a hash of their names and
// resourceVersions, whatever their order (the informer's index gives them
// in no particular order): the sum of each slice's hash. No allocation per
// source and reconcile, where a string of them cost one. Two sets of
// slices that hash the same (1 in 2^64) would leave a source unplanned
// until its export or slices change again.
func heldSlices(held []*discoveryv1.EndpointSlice) uint64 {
	var sum uint64
	for _, s := range held {
		var h maphash.Hash
		h.SetSeed(heldSeed)
		h.WriteString(s.Name)
		h.WriteByte(0)
		h.WriteString(s.ResourceVersion)
		sum += h.Sum64()
	}
	return sum
}

var heldSeed = maphash.MakeSeed()
