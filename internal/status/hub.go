package status

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
)

// Hub is the hub that members publish into (hub mode): a member without a
// client of its own is read through its publications there, as the
// importers read it.
type Hub struct {
	Client client.Reader
	// Namespace is the publications' namespace.
	Namespace string
}

// readHub reads the publications of the members without a client of their
// own into their held: each head an export, its endpoints (of the head,
// or of its parts) as EndpointSlices of the Service, as its source holds
// them. A publication that the importers refuse is a problem and left out.
func readHub(ctx context.Context, hub *Hub, members []Member, holds []*held, only *types.NamespacedName, problems *[]string) {
	viaHub := map[clusterset.ClusterID]*held{}
	for i, m := range members {
		if m.Client == nil {
			holds[i].viaHub, holds[i].readable = true, true
			viaHub[clusterset.ClusterID(m.ID)] = holds[i]
		}
	}
	if len(viaHub) == 0 {
		return
	}
	var list v1alpha1.PublishedExportList
	if err := listPaged(ctx, hub.Client, func(l *v1alpha1.PublishedExportList) { list.Items = append(list.Items, l.Items...) }, client.InNamespace(hub.Namespace)); err != nil {
		for _, h := range viaHub {
			h.err = fmt.Errorf("the hub cannot be read: %w", err)
		}
		return
	}
	endpoints := readPublications(list.Items, viaHub, only, problems)
	for cluster, h := range viaHub {
		for key := range h.exports {
			for _, g := range endpoints[publish.ObjectName(cluster, key)] {
				h.slices = append(h.slices, discoveryv1.EndpointSlice{
					ObjectMeta:  metav1.ObjectMeta{Namespace: key.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: key.Name}},
					AddressType: g.AddressType, Endpoints: g.Endpoints,
				})
			}
		}
	}
}

// readPublications adds each head of a member in viaHub to its exports,
// and returns the endpoints of each (by the head's name): the head's own,
// or those of its parts.
func readPublications(items []v1alpha1.PublishedExport, viaHub map[clusterset.ClusterID]*held, only *types.NamespacedName, problems *[]string) map[string][]v1alpha1.EndpointGroup {
	endpoints := map[string][]v1alpha1.EndpointGroup{}
	var parts []*v1alpha1.PublishedExport
	for i := range items {
		p := &items[i]
		switch {
		case publish.IsMarker(p):
		case publish.IsPart(p):
			parts = append(parts, p)
		default:
			es, err := publish.Decode(p)
			if err != nil {
				if viaHub[clusterset.ClusterID(p.Spec.Cluster)] != nil {
					*problems = append(*problems, fmt.Sprintf("publication %s in the hub is refused by the importers: %v", p.Name, err))
				}
				continue
			}
			h := viaHub[es.Cluster]
			if h == nil || (only != nil && es.Key != *only) {
				continue
			}
			h.exports[es.Key] = &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: es.Key.Namespace, Name: es.Key.Name}}
			endpoints[p.Name] = p.Spec.Endpoints
		}
	}
	for _, p := range parts {
		part, err := publish.DecodePart(p)
		if err != nil {
			continue // its head stands for the export; the importers leave the part out
		}
		head := publish.ObjectName(part.Cluster, part.Key)
		if _, ok := endpoints[head]; ok {
			endpoints[head] = append(endpoints[head], p.Spec.Endpoints...)
		}
	}
	return endpoints
}
