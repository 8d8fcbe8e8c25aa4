package imports

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// importedSlices gives the imported slices of one import as the cache
// holds them: shared, never to be modified (the reconciler never does).
type importedSlices interface {
	of(ctx context.Context, key types.NamespacedName) ([]*discoveryv1.EndpointSlice, error)
}

// importedSliceIndex indexes the imported slices by their import: a
// change costs the same however many imports the cluster holds.
const importedSliceIndex = "mcs-syncer.endpointslice.import"

// indexImportedSlices indexes the imported slices of sliceCache by their
// import, and returns what reads them through the index: the informer's
// own objects. (A list through the cache copied every slice of an import
// into the list it returns, which for an import of 1,000 sources was a
// tenth of the importer's CPU, and more in garbage collection: make
// bench-scale, 1,000 members.) controller-runtime's cache hands out
// client-go's informers; another is an error.
func indexImportedSlices(sliceCache cache.Cache) (importedSlices, error) {
	inf, err := sliceCache.GetInformer(context.Background(), &discoveryv1.EndpointSlice{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	shared, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the EndpointSlice cache's informer is a %T, not client-go's SharedIndexInformer, whose index the import controller reads", inf)
	}
	if err := shared.AddIndexers(toolscache.Indexers{importedSliceIndex: byImport}); err != nil {
		return nil, err
	}
	return indexedSlices{shared.GetIndexer()}, nil
}

// byImport indexes an imported slice by its import's namespace/name (its
// namespace and multicluster.kubernetes.io/service-name label).
func byImport(obj any) ([]string, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + o.GetLabels()[mcsv1beta1.LabelServiceName]}, nil
}

// indexedSlices reads the imported slices from the informer's indexer.
type indexedSlices struct{ indexer toolscache.Indexer }

func (s indexedSlices) of(_ context.Context, key types.NamespacedName) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := s.indexer.ByIndex(importedSliceIndex, key.Namespace+"/"+key.Name)
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		slice, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, fmt.Errorf("the imported slices' index holds a %T", o)
		}
		out = append(out, slice)
	}
	return out, nil
}
