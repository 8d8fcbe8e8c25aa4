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

// indexImportedSlices indexes the imported slices of sliceCache by their
// import, and returns what reads them through the index: the informer's
// own objects where the cache's informer is client-go's (a list through
// the cache copied every slice of an import into the list it returns,
// which for an import of 1,000 sources was a tenth of the importer's CPU,
// and more in garbage collection: make bench-scale, 1,000 members), a
// list through the cache otherwise.
func indexImportedSlices(sliceCache cache.Cache) (importedSlices, error) {
	inf, err := sliceCache.GetInformer(context.Background(), &discoveryv1.EndpointSlice{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	if shared, ok := inf.(toolscache.SharedIndexInformer); ok {
		if err := shared.AddIndexers(toolscache.Indexers{importedSliceIndex: byImport}); err != nil {
			return nil, err
		}
		return indexedSlices{shared.GetIndexer()}, nil
	}
	if err := sliceCache.IndexField(context.Background(), &discoveryv1.EndpointSlice{}, importedSliceIndex, importedSliceKey); err != nil {
		return nil, err
	}
	return listedSlices{sliceCache}, nil
}

// byImport indexes an imported slice by its import's namespace/name.
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

// listedSlices lists the imported slices through a reader that indexes
// them by importedSliceIndex (the unit tests' fake client; a cache whose
// informers are not client-go's).
type listedSlices struct{ reader client.Reader }

func (s listedSlices) of(ctx context.Context, key types.NamespacedName) ([]*discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := s.reader.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingFields{importedSliceIndex: key.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
