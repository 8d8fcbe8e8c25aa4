package imports

import (
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
	m  map[types.NamespacedName]map[clusterset.ClusterID]settledInputs
}

// settledInputs are what a source's slices are planned from: the export
// (the Store's, replaced on every change, never modified), what the
// import gives every source (sharedInputs), and the slices held (names
// and resourceVersions: ours written since, or anyone's change, differ).
type settledInputs struct {
	export *clusterset.ExportedService
	shared string
	slices string
}

func newSettled() *settled {
	return &settled{m: map[types.NamespacedName]map[clusterset.ClusterID]settledInputs{}}
}

// same reports whether source's slices of import key were found up to
// date under these inputs.
func (s *settled) same(key types.NamespacedName, source clusterset.ClusterID, in settledInputs) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.m[key][source]
	return ok && last == in
}

// record notes that source's slices of import key are up to date under in,
// or (upToDate false) that they may not be.
func (s *settled) record(key types.NamespacedName, source clusterset.ClusterID, in settledInputs, upToDate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !upToDate {
		delete(s.m[key], source)
		return
	}
	if s.m[key] == nil {
		s.m[key] = map[clusterset.ClusterID]settledInputs{}
	}
	s.m[key][source] = in
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

// heldSlices identifies the slices held by name and resourceVersion.
func heldSlices(held []*discoveryv1.EndpointSlice) string {
	var b strings.Builder
	for _, s := range held {
		b.WriteString(s.Name + "@" + s.ResourceVersion + "\x00")
	}
	return b.String()
}
