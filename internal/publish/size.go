package publish

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// heldBytes estimates the size of a publication as JSON, as the hub stores
// and sends it, without encoding it (a reader counts every head and part it
// takes, on every change: ReaderOptions.MaxBytes): the length of every
// string a member chooses, plus each field's name and punctuation. It is
// within a fifth of the encoded size for the publications mcs-syncer
// writes (TestHeldBytesEstimatesJSON).
func heldBytes(p *v1alpha1.PublishedExport) int64 {
	n := 250 + len(p.Name) + len(p.Namespace) + len(p.ResourceVersion) + len(p.UID)
	for k, v := range p.Labels {
		n += len(k) + len(v) + 6
	}
	for k, v := range p.Annotations {
		n += len(k) + len(v) + 6
	}
	s := &p.Spec
	n += len(s.Cluster) + len(s.Namespace) + len(s.Name) + len(s.Part) + len(s.LastChangeTriggerTime)
	if s.Type != "" {
		n += 120 + len(s.Type) + len(s.SessionAffinity) // and exportCreated's time
	}
	for _, id := range s.Parts {
		n += len(id) + 3
	}
	for _, port := range s.Ports {
		n += 60 + len(port.Name)
		if port.AppProtocol != nil {
			n += len(*port.AppProtocol) + 16
		}
	}
	for k, v := range s.ExportedLabels {
		n += len(k) + len(v) + 6
	}
	for k, v := range s.ExportedAnnotations {
		n += len(k) + len(v) + 6
	}
	for i := range s.Endpoints {
		g := &s.Endpoints[i]
		n += 40
		for _, port := range g.Ports {
			n += 50
			if port.Name != nil {
				n += len(*port.Name)
			}
			if port.AppProtocol != nil {
				n += len(*port.AppProtocol) + 16
			}
		}
		for j := range g.Endpoints {
			n += endpointBytes(&g.Endpoints[j])
		}
	}
	return int64(n)
}

// endpointBytes estimates one endpoint's JSON.
func endpointBytes(e *discoveryv1.Endpoint) int {
	n := 10
	for _, a := range e.Addresses {
		n += len(a) + 3
	}
	c := &e.Conditions
	for _, set := range []*bool{c.Ready, c.Serving, c.Terminating} {
		if set != nil {
			n += 18
		}
	}
	for _, s := range []*string{e.Hostname, e.NodeName, e.Zone} {
		if s != nil {
			n += len(*s) + 14
		}
	}
	if r := e.TargetRef; r != nil {
		n += 16
		for _, s := range []string{r.Kind, r.Namespace, r.Name, string(r.UID), r.APIVersion, r.ResourceVersion, r.FieldPath} {
			if s != "" {
				n += len(s) + 16
			}
		}
	}
	if h := e.Hints; h != nil {
		n += 20
		for _, z := range h.ForZones {
			n += len(z.Name) + 12
		}
		for _, z := range h.ForNodes {
			n += len(z.Name) + 12
		}
	}
	return n
}
