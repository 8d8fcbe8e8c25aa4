package imports

import (
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestIndexedSlices: an import's slices are the indexer's own objects
// (no copy), those of its namespace and name only.
func TestIndexedSlices(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{importedSliceIndex: byImport})
	slice := func(ns, name, imported string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{mcsv1beta1.LabelServiceName: imported}}}
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := slice("ns", "web-a", "web"), slice("ns", "web-b", "web")
	slice("ns", "db-a", "db")
	slice("other", "web-a", "web")

	got, err := indexedSlices{indexer}.of(t.Context(), types.NamespacedName{Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y *discoveryv1.EndpointSlice) int { return strings.Compare(x.Name, y.Name) })
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("ns/web's slices: %v, want the indexer's web-a and web-b themselves", got)
	}
}
