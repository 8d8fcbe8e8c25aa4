package publish

import (
	"slices"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// transform is the cache transform of PublishedExports: clusterset's
// StripUnread, the labels' keys shared (plumbing.Keys), then compact. An
// importer holds every publication of the clusterset (in the hub load of
// make bench-scale, 25,200 of 10 endpoints each), and its Store shares
// their endpoints (Decode copies nothing).
func transform(obj any) (any, error) {
	obj, err := plumbing.StripUnread(obj)
	if p, ok := obj.(*v1alpha1.PublishedExport); ok && err == nil {
		p.Labels = publicationLabelKeys.Share(p.Labels)
		compact(p)
	}
	return obj, err
}

// publicationLabelKeys are the keys of a publication's labels
// (publicationLabels).
var publicationLabelKeys = plumbing.NewKeys(mcsv1beta1.LabelSourceCluster, mcsv1beta1.LabelServiceName, ServiceNamespaceLabel)

// compact gives a decoded publication's endpoints arrays of their own
// length, and its endpoints' conditions shared pointers. The JSON decoder
// grows an array as it reads it (10 endpoints land in an array of 13, one
// address in an array of 4) and allocates a bool for every condition:
// 62 MiB of an importer's 224 MiB heap at 255 members were such arrays and
// bools. Nothing changes but capacity and the identity of equal bools; the
// cache's objects and the Store's exports are never modified.
func compact(p *v1alpha1.PublishedExport) {
	for i := range p.Spec.Endpoints {
		g := &p.Spec.Endpoints[i]
		g.Ports = slices.Clone(g.Ports)
		g.Endpoints = slices.Clone(g.Endpoints)
		for j := range g.Endpoints {
			ep := &g.Endpoints[j]
			ep.Addresses = slices.Clone(ep.Addresses)
			c := &ep.Conditions
			c.Ready, c.Serving, c.Terminating = sharedBool(c.Ready), sharedBool(c.Serving), sharedBool(c.Terminating)
		}
	}
}

// trueValue and falseValue are what every compacted condition points to.
var trueValue, falseValue = true, false

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &trueValue
	default:
		return &falseValue
	}
}
