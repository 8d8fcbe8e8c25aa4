package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/sync/errgroup"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Member is a member of the clusterset as the report reads it.
type Member struct {
	// ID is its cluster ID, as imported slices name their source.
	ID string
	// Client reads its API server; nil when it cannot be read directly
	// (a member read through a hub), and it is then left out.
	Client client.Reader
}

// Report is the clusterset's status.
type Report struct {
	Members  []MemberReport  `json:"members"`
	Services []ServiceReport `json:"services"`
	// Problems says what is not converged; none: every import is what the
	// exporters hold now.
	Problems []string `json:"problems"`
}

// MemberReport is one member.
type MemberReport struct {
	ID string `json:"id"`
	// Read says its API server answered every list; Error why not.
	Read           bool   `json:"read"`
	Error          string `json:"error,omitempty"`
	ServiceExports int    `json:"serviceExports"`
	ServiceImports int    `json:"serviceImports"`
}

// ServiceReport is one exported (or still imported) Service.
type ServiceReport struct {
	Namespace  string   `json:"namespace"`
	Name       string   `json:"name"`
	ExportedBy []string `json:"exportedBy"`
	// NotReady are the exports whose Ready is not True: "cluster: reason".
	NotReady []string `json:"notReady,omitempty"`
	// Conflicts are the Conflict messages of the exports, each once.
	Conflicts []string       `json:"conflicts,omitempty"`
	Imports   []ImportReport `json:"imports"`
}

// ImportReport is a Service's import into one consumer.
type ImportReport struct {
	Consumer string `json:"consumer"`
	Imported bool   `json:"imported"`
	Type     string `json:"type,omitempty"`
	// IPs are the clusterset IPs (ClusterSetIP imports).
	IPs []string `json:"ips,omitempty"`
	// Clusters are its status.clusters.
	Clusters  []string          `json:"clusters,omitempty"`
	Ready     string            `json:"ready,omitempty"`
	Endpoints []SourceEndpoints `json:"endpoints,omitempty"`
}

// SourceEndpoints compares the endpoints imported from a source with those
// its EndpointSlices hold (of the import's IP families).
type SourceEndpoints struct {
	Source   string `json:"source"`
	Imported int    `json:"imported"`
	Exported int    `json:"exported"`
}

// held is what one member holds.
type held struct {
	exports  map[types.NamespacedName]*mcsv1beta1.ServiceExport
	imports  map[types.NamespacedName]*mcsv1beta1.ServiceImport
	slices   []discoveryv1.EndpointSlice // every EndpointSlice of an exported or imported Service's namespace
	err      error
	readable bool
}

// parallelReads is how many members Gather reads at once: a member that
// does not answer costs its timeout once, not once per member after it.
const parallelReads = 16

// Gather reads every member and reports; only (non-nil) limits it to one
// Service.
func Gather(ctx context.Context, members []Member, only *types.NamespacedName) Report {
	r := Report{Members: []MemberReport{}, Services: []ServiceReport{}, Problems: []string{}}
	reads := readAll(ctx, members, only)
	holds := map[string]*held{}
	for i, m := range members {
		h := reads[i]
		holds[m.ID] = h
		mr := MemberReport{ID: m.ID, Read: h.err == nil && h.readable, ServiceExports: len(h.exports), ServiceImports: len(h.imports)}
		switch {
		case !h.readable:
			mr.Error = "not read: no connection settings of its own (read through the hub)"
		case h.err != nil:
			mr.Error = h.err.Error()
			r.Problems = append(r.Problems, fmt.Sprintf("member %s cannot be read: %v", m.ID, h.err))
		}
		r.Members = append(r.Members, mr)
	}
	for _, key := range keysOf(holds) {
		r.Services = append(r.Services, service(key, members, holds, &r.Problems))
	}
	return r
}

// Converged reports whether r has no problem.
func (r Report) Converged() bool { return len(r.Problems) == 0 }

// readAll reads every member, parallelReads at a time, into the slice in
// members' order.
func readAll(ctx context.Context, members []Member, only *types.NamespacedName) []*held {
	out := make([]*held, len(members))
	var g errgroup.Group
	g.SetLimit(parallelReads)
	for i, m := range members {
		g.Go(func() error {
			out[i] = read(ctx, m, only)
			return nil
		})
	}
	_ = g.Wait() // read keeps each member's error in its held
	return out
}

// read lists what member m holds: its ServiceExports, ServiceImports and
// the EndpointSlices of their namespaces.
func read(ctx context.Context, m Member, only *types.NamespacedName) *held {
	h := &held{exports: map[types.NamespacedName]*mcsv1beta1.ServiceExport{}, imports: map[types.NamespacedName]*mcsv1beta1.ServiceImport{}}
	if m.Client == nil {
		return h
	}
	h.readable = true
	var opts []client.ListOption
	if only != nil {
		opts = append(opts, client.InNamespace(only.Namespace))
	}
	var exports mcsv1beta1.ServiceExportList
	var imports mcsv1beta1.ServiceImportList
	if h.err = m.Client.List(ctx, &exports, opts...); h.err != nil {
		return h
	}
	if h.err = m.Client.List(ctx, &imports, opts...); h.err != nil {
		return h
	}
	namespaces := map[string]bool{}
	for i := range exports.Items {
		if key := client.ObjectKeyFromObject(&exports.Items[i]); only == nil || key == *only {
			h.exports[key] = &exports.Items[i]
			namespaces[key.Namespace] = true
		}
	}
	for i := range imports.Items {
		if key := client.ObjectKeyFromObject(&imports.Items[i]); only == nil || key == *only {
			h.imports[key] = &imports.Items[i]
			namespaces[key.Namespace] = true
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		var list discoveryv1.EndpointSliceList
		if h.err = m.Client.List(ctx, &list, client.InNamespace(ns)); h.err != nil {
			return h
		}
		h.slices = append(h.slices, list.Items...)
	}
	return h
}

// keysOf returns every Service that a member exports or imports, sorted.
func keysOf(holds map[string]*held) []types.NamespacedName {
	keys := map[types.NamespacedName]bool{}
	for _, h := range holds {
		for k := range h.exports {
			keys[k] = true
		}
		for k := range h.imports {
			keys[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(keys), func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// service reports key: its exports, then its import into each member that
// was read, adding what is not converged to problems.
func service(key types.NamespacedName, members []Member, holds map[string]*held, problems *[]string) ServiceReport {
	sr := ServiceReport{Namespace: key.Namespace, Name: key.Name}
	conflicts := map[string]bool{}
	for _, m := range members {
		se := holds[m.ID].exports[key]
		if se == nil {
			continue
		}
		sr.ExportedBy = append(sr.ExportedBy, m.ID)
		if ready := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady)); ready == nil || ready.Status != metav1.ConditionTrue {
			why := "no Ready condition yet"
			if ready != nil {
				why = ready.Reason + ": " + ready.Message
			}
			sr.NotReady = append(sr.NotReady, m.ID+": "+why)
			*problems = append(*problems, fmt.Sprintf("%s: the export of %s is not Ready (%s)", key, m.ID, why))
		}
		if c := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); c != nil && c.Status == metav1.ConditionTrue && !conflicts[c.Message] {
			conflicts[c.Message] = true
			sr.Conflicts = append(sr.Conflicts, c.Reason+": "+c.Message)
		}
	}
	for _, consumer := range members {
		h := holds[consumer.ID]
		if !h.readable || h.err != nil {
			continue
		}
		sr.Imports = append(sr.Imports, importInto(key, consumer.ID, h, sr.ExportedBy, holds, problems))
	}
	return sr
}

// importInto reports key's import into consumer.
func importInto(key types.NamespacedName, consumer string, h *held, exporters []string, holds map[string]*held, problems *[]string) ImportReport {
	ir := ImportReport{Consumer: consumer}
	si := h.imports[key]
	if si == nil {
		if len(exporters) > 0 {
			*problems = append(*problems, fmt.Sprintf("%s: not imported into %s", key, consumer))
		}
		return ir
	}
	ir.Imported, ir.Type, ir.IPs = true, string(si.Spec.Type), si.Spec.IPs
	for _, c := range si.Status.Clusters {
		ir.Clusters = append(ir.Clusters, c.Cluster)
	}
	if ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready != nil {
		ir.Ready = string(ready.Status)
		if ready.Status != metav1.ConditionTrue {
			ir.Ready += " (" + ready.Reason + ": " + ready.Message + ")"
		}
	}
	if len(exporters) == 0 {
		*problems = append(*problems, fmt.Sprintf("%s: imported into %s, but no member exports it", key, consumer))
		return ir
	}
	if !slices.Equal(slices.Sorted(slices.Values(ir.Clusters)), slices.Sorted(slices.Values(exporters))) {
		*problems = append(*problems, fmt.Sprintf("%s: imported into %s from %v; exported by %v", key, consumer, ir.Clusters, exporters))
	}
	addressTypes := reconciler.AddressTypesForIPFamilies(si.Spec.IPFamilies)
	for _, source := range exporters {
		src := holds[source]
		if !src.readable || src.err != nil {
			continue
		}
		e := SourceEndpoints{Source: source, Imported: importedFrom(h.slices, key, source), Exported: exportedBy(src.slices, key, addressTypes)}
		ir.Endpoints = append(ir.Endpoints, e)
		if e.Imported != e.Exported {
			*problems = append(*problems, fmt.Sprintf("%s: %s holds %d endpoints imported from %s, which exports %d", key, consumer, e.Imported, source, e.Exported))
		}
	}
	return ir
}

// importedFrom counts the endpoints of key imported from source.
func importedFrom(held []discoveryv1.EndpointSlice, key types.NamespacedName, source string) int {
	return endpoints(held, func(s *discoveryv1.EndpointSlice) bool {
		return s.Namespace == key.Namespace && s.Labels[mcsv1beta1.LabelServiceName] == key.Name && s.Labels[mcsv1beta1.LabelSourceCluster] == source
	})
}

// exportedBy counts the endpoints of Service key in its own cluster's
// EndpointSlices (not imported ones), of the address types (none: all).
func exportedBy(held []discoveryv1.EndpointSlice, key types.NamespacedName, addressTypes []discoveryv1.AddressType) int {
	return endpoints(held, func(s *discoveryv1.EndpointSlice) bool {
		_, imported := s.Labels[mcsv1beta1.LabelSourceCluster]
		return s.Namespace == key.Namespace && s.Labels[discoveryv1.LabelServiceName] == key.Name && !imported &&
			(len(addressTypes) == 0 || slices.Contains(addressTypes, s.AddressType))
	})
}

// endpoints counts the distinct endpoints (address type and first
// address) of the slices that match.
func endpoints(held []discoveryv1.EndpointSlice, match func(*discoveryv1.EndpointSlice) bool) int {
	seen := map[string]bool{}
	for i := range held {
		s := &held[i]
		if !match(s) {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) > 0 {
				seen[string(s.AddressType)+"/"+ep.Addresses[0]] = true
			}
		}
	}
	return len(seen)
}

// Text renders r as tables, then its problems.
func (r Report) Text() string {
	var out strings.Builder
	b := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	_, _ = io.WriteString(b, "MEMBER\tREAD\tSERVICEEXPORTS\tSERVICEIMPORTS\tERROR\n")
	for _, m := range r.Members {
		fmt.Fprintf(b, "%s\t%v\t%d\t%d\t%s\n", m.ID, m.Read, m.ServiceExports, m.ServiceImports, cmp.Or(m.Error, "-"))
	}
	_ = b.Flush()
	b = tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	_, _ = io.WriteString(b, "\nSERVICE\tEXPORTED BY\tCONSUMER\tIMPORTED\tIPS\tREADY\tENDPOINTS (imported/exported)\n")
	for _, s := range r.Services {
		name := s.Namespace + "/" + s.Name
		for _, i := range s.Imports {
			var eps []string
			for _, e := range i.Endpoints {
				eps = append(eps, fmt.Sprintf("%s %d/%d", e.Source, e.Imported, e.Exported))
			}
			fmt.Fprintf(b, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", name, cmp.Or(strings.Join(s.ExportedBy, ","), "-"), i.Consumer, i.Imported,
				cmp.Or(strings.Join(i.IPs, ","), "-"), cmp.Or(i.Ready, "-"), cmp.Or(strings.Join(eps, ", "), "-"))
		}
		for _, c := range s.Conflicts {
			fmt.Fprintf(b, "%s\tconflict: %s\n", name, c)
		}
	}
	_ = b.Flush()
	if r.Converged() {
		out.WriteString("\nconverged: every import is what its exporters hold now\n")
	} else {
		out.WriteString("\nnot converged:\n")
		for _, p := range r.Problems {
			out.WriteString("  " + p + "\n")
		}
	}
	return out.String()
}
