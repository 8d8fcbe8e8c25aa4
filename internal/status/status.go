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

	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Member is a member of the clusterset as the report reads it.
type Member struct {
	// ID is its cluster ID, as imported slices name their source.
	ID string
	// Client reads its API server; nil when it cannot be read directly
	// (a member read through a hub), and it is then left out.
	Client client.Reader
	// Syncers, if set, finds the mcs-syncers that run in the member (its
	// Pods, read through its API server).
	Syncers func(context.Context) ([]Syncer, error)
	// MCSAPI is the version of the MCS API that Client speaks, the one the
	// member serves (internal/mcsapi); "" if not known.
	MCSAPI string
}

// Input is what Gather reads.
type Input struct {
	Members []Member
	// Syncers are mcs-syncers besides those the members run (a process
	// outside the clusters, by its probe address).
	Syncers []Syncer
	// Only, if set, limits the report to one Service.
	Only *types.NamespacedName
	// Hub, if set, is read for the members without a client of their own.
	Hub *Hub
}

// Report is the clusterset's status.
type Report struct {
	Members []MemberReport `json:"members"`
	// Syncers are the mcs-syncers whose view of the members was read.
	Syncers  []SyncerReport  `json:"syncers"`
	Services []ServiceReport `json:"services"`
	// Problems says what is not converged; none: every import is what the
	// exporters hold now.
	Problems []string `json:"problems"`
}

// MemberReport is one member.
type MemberReport struct {
	ID string `json:"id"`
	// Read says its API server (or the hub, ThroughHub) answered every
	// list; Error why not.
	Read bool `json:"read"`
	// ThroughHub: it was read through its publications in the hub: its
	// exports and their endpoints, as the importers read them.
	ThroughHub     bool   `json:"throughHub,omitempty"`
	Error          string `json:"error,omitempty"`
	ServiceExports int    `json:"serviceExports"`
	ServiceImports int    `json:"serviceImports"`
	// Health is the worst that a leading mcs-syncer sees of it (up, held,
	// silent, down; unknown if none lists it), since HealthSince, in
	// membership State.
	Health      string `json:"health"`
	HealthSince string `json:"healthSince,omitempty"`
	State       string `json:"state,omitempty"`
	// HeartbeatAgeSeconds is the age of its latest heartbeat that an
	// mcs-syncer saw (per-cluster and hub mode).
	HeartbeatAgeSeconds *int64 `json:"heartbeatAgeSeconds,omitempty"`
	// Version is that of the mcs-syncer that runs for it, if read.
	Version string `json:"version,omitempty"`
	SeenBy  []Seen `json:"seenBy,omitempty"`
	// MCSAPI is the version of the MCS API it was read in, the one it
	// serves (v1beta1, or v1alpha1 for mcs-api's CRDs before v0.5.0).
	MCSAPI string `json:"mcsAPI,omitempty"`
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
	// Unimportable are exported endpoints that a consumer's API server
	// would refuse (imports.Unimportable): mcs-syncer leaves them out on
	// purpose, so they are not in Exported.
	Unimportable int `json:"unimportable,omitempty"`
}

// held is what one member holds.
type held struct {
	exports map[types.NamespacedName]*mcsv1beta1.ServiceExport
	imports map[types.NamespacedName]*mcsv1beta1.ServiceImport
	slices  []discoveryv1.EndpointSlice // every EndpointSlice of an exported or imported Service's namespace
	// byService indexes slices: a clusterset of hundreds of sources holds
	// tens of thousands of slices per consumer, and each Service's count
	// per source must not scan them all.
	byService map[sliceKey][]*discoveryv1.EndpointSlice
	err       error
	readable  bool
	// viaHub: read through its publications in the hub; its exports have
	// no conditions, and it holds no import.
	viaHub bool
	// syncers are the mcs-syncers found in it, or why none could be.
	syncers    []Syncer
	syncersErr error
}

// newHeld holds nothing yet.
func newHeld() *held {
	return &held{exports: map[types.NamespacedName]*mcsv1beta1.ServiceExport{}, imports: map[types.NamespacedName]*mcsv1beta1.ServiceImport{}}
}

// sliceKey names a Service's slices: its own (source "") or those
// imported from source.
type sliceKey struct {
	service types.NamespacedName
	source  string
}

// index fills h.byService.
func (h *held) index() {
	h.byService = map[sliceKey][]*discoveryv1.EndpointSlice{}
	for i := range h.slices {
		s := &h.slices[i]
		k := sliceKey{service: types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}}
		if source, imported := s.Labels[mcsv1beta1.LabelSourceCluster]; imported {
			k = sliceKey{service: types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[mcsv1beta1.LabelServiceName]}, source: source}
		}
		h.byService[k] = append(h.byService[k], s)
	}
}

// parallelReads is how many members Gather reads at once: a member that
// does not answer costs its timeout once, not once per member after it.
const parallelReads = 16

// Gather reads every member and mcs-syncer, and reports.
func Gather(ctx context.Context, in Input) Report {
	members, only := in.Members, in.Only
	r := Report{Members: []MemberReport{}, Syncers: []SyncerReport{}, Services: []ServiceReport{}, Problems: []string{}}
	// The syncers named by the caller are read beside the members: a
	// member that does not answer until the deadline must not leave their
	// view of it (that it is down) unread.
	named := make(chan []viewed, 1)
	go func() { named <- readSyncers(ctx, in.Syncers) }()
	reads := readAll(ctx, members, only)
	if in.Hub != nil {
		readHub(ctx, in.Hub, members, reads, only, &r.Problems)
	}
	var found []Syncer
	for _, h := range reads {
		found = append(found, h.syncers...)
		h.index()
	}
	holds := map[string]*held{}
	for i, m := range members {
		h := reads[i]
		holds[m.ID] = h
		mr := MemberReport{ID: m.ID, Read: h.err == nil && h.readable, ThroughHub: h.viaHub, ServiceExports: len(h.exports), ServiceImports: len(h.imports),
			MCSAPI: m.MCSAPI}
		switch {
		case !h.readable:
			mr.Error = "not read: no connection settings of its own, and no hub given (it is read through the hub)"
		case h.err != nil:
			mr.Error = h.err.Error()
			r.Problems = append(r.Problems, fmt.Sprintf("member %s cannot be read: %v", m.ID, h.err))
		}
		if h.syncersErr != nil {
			r.Syncers = append(r.Syncers, SyncerReport{Name: m.ID, Error: "its mcs-syncer Pods cannot be listed: " + h.syncersErr.Error()})
		}
		r.Members = append(r.Members, mr)
	}
	r.addHealth(append(slices.Clone(in.Syncers), found...), append(<-named, readSyncers(ctx, found)...))
	for _, key := range keysOf(holds) {
		r.Services = append(r.Services, service(key, members, holds, &r.Problems))
	}
	if only != nil && len(r.Services) == 0 && allRead(r.Members) {
		// Asked of one Service, nothing found is no convergence: a typo,
		// or an export that never reached any member.
		r.Problems = append(r.Problems, fmt.Sprintf("%s is exported by no member and imported by none", only))
	}
	return r
}

// allRead reports whether every member was read (directly or through the
// hub): only then does finding nothing of a Service mean there is none.
func allRead(members []MemberReport) bool {
	for _, m := range members {
		if !m.Read {
			return false
		}
	}
	return true
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
			out[i] = readWithin(ctx, m, only)
			return nil
		})
	}
	_ = g.Wait() // read keeps each member's error in its held
	return out
}

// readWithin is read, given up when ctx ends: a request that does not
// heed ctx (a client's discovery of the resources it lists, bounded only
// by its own timeout) must not hold the report past the caller's
// deadline. The member is then reported as not read.
func readWithin(ctx context.Context, m Member, only *types.NamespacedName) *held {
	done := make(chan *held, 1)
	go func() { done <- read(ctx, m, only) }()
	select {
	case h := <-done:
		return h
	case <-ctx.Done():
		h := newHeld()
		h.readable, h.err = m.Client != nil, fmt.Errorf("no answer within the timeout: %w", ctx.Err())
		return h
	}
}

// read lists what member m holds: its ServiceExports, ServiceImports and
// the EndpointSlices of their namespaces.
func read(ctx context.Context, m Member, only *types.NamespacedName) *held {
	h := newHeld()
	if m.Client == nil {
		return h
	}
	h.readable = true
	if m.Syncers != nil {
		h.syncers, h.syncersErr = m.Syncers(ctx)
	}
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
		h.err = listPaged(ctx, m.Client, func(l *discoveryv1.EndpointSliceList) { h.slices = append(h.slices, l.Items...) }, client.InNamespace(ns))
		if h.err != nil {
			return h
		}
	}
	return h
}

// pageSize is how many objects one list request asks for: a namespace of
// tens of thousands of slices (or a hub of as many publications) is read in
// pages, each well within a request's timeout.
const pageSize = 1000

// listPaged lists what opts select, a page at a time, handing each page to
// each.
func listPaged[T any, L interface {
	*T
	client.ObjectList
}](ctx context.Context, c client.Reader, each func(L), opts ...client.ListOption) error {
	next := ""
	for {
		page := L(new(T))
		if err := c.List(ctx, page, append(opts, client.Limit(pageSize), client.Continue(next))...); err != nil {
			return err
		}
		each(page)
		if next = page.GetContinue(); next == "" {
			return nil
		}
	}
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
		if holds[m.ID].viaHub {
			continue // its ServiceExport's conditions are its own cluster's
		}
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
		if !h.readable || h.err != nil || h.viaHub {
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
		e := SourceEndpoints{Source: source, Imported: importedFrom(h, key, source)}
		e.Exported, e.Unimportable = exportedBy(src, key, addressTypes)
		ir.Endpoints = append(ir.Endpoints, e)
		if e.Imported != e.Exported {
			*problems = append(*problems, fmt.Sprintf("%s: %s holds %d endpoints imported from %s, which exports %d", key, consumer, e.Imported, source, e.Exported))
		}
	}
	return ir
}

// importedFrom counts the endpoints of key that h imported from source.
func importedFrom(h *held, key types.NamespacedName, source string) int {
	n, _ := endpoints(h.byService[sliceKey{service: key, source: source}], nil)
	return n
}

// exportedBy counts the endpoints of Service key in its own cluster's
// EndpointSlices (not imported ones) in h, of the address types (none:
// all): those a consumer may import, and those it would refuse.
func exportedBy(h *held, key types.NamespacedName, addressTypes []discoveryv1.AddressType) (importable, unimportable int) {
	return endpoints(h.byService[sliceKey{service: key}], addressTypes)
}

// endpoints counts the distinct endpoints (address type and first
// address) of the slices of the address types (none: all): those a
// consumer's API server takes, and those it would refuse.
func endpoints(held []*discoveryv1.EndpointSlice, addressTypes []discoveryv1.AddressType) (importable, unimportable int) {
	seen := map[string]bool{}
	for _, s := range held {
		if len(addressTypes) > 0 && !slices.Contains(addressTypes, s.AddressType) {
			continue
		}
		for j := range s.Endpoints {
			ep := &s.Endpoints[j]
			id := string(s.AddressType) + "/"
			if len(ep.Addresses) > 0 {
				id += ep.Addresses[0]
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			if imports.Unimportable(s.AddressType, ep) != "" {
				unimportable++
			} else {
				importable++
			}
		}
	}
	return importable, unimportable
}

// Text renders r as tables, then its problems; wide adds each member's
// state and what each mcs-syncer sees of it, and each import's type and
// clusters.
func (r Report) Text(wide bool) string {
	var out strings.Builder
	r.membersText(&out, wide)
	r.syncersText(&out)
	r.servicesText(&out, wide)
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

func (r Report) membersText(out io.Writer, wide bool) {
	b := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "MEMBER\tHEALTH\tSINCE\tHEARTBEAT\tVERSION\tREAD\tSERVICEEXPORTS\tSERVICEIMPORTS\tERROR"
	if wide {
		header += "\tSTATE\tMCS API\tSEEN BY"
	}
	_, _ = io.WriteString(b, header+"\n")
	for _, m := range r.Members {
		heartbeat := "-"
		if m.HeartbeatAgeSeconds != nil {
			heartbeat = fmt.Sprintf("%ds ago", *m.HeartbeatAgeSeconds)
		}
		read := fmt.Sprint(m.Read)
		if m.Read && m.ThroughHub {
			read = "hub"
		}
		fmt.Fprintf(b, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s", m.ID, m.Health, cmp.Or(m.HealthSince, "-"), heartbeat, cmp.Or(m.Version, "-"),
			read, m.ServiceExports, m.ServiceImports, cmp.Or(m.Error, "-"))
		if wide {
			var seen []string
			for _, s := range m.SeenBy {
				seen = append(seen, s.Syncer+": "+s.Health)
			}
			fmt.Fprintf(b, "\t%s\t%s\t%s", cmp.Or(m.State, "-"), cmp.Or(m.MCSAPI, "-"), cmp.Or(strings.Join(seen, "; "), "-"))
		}
		_, _ = io.WriteString(b, "\n")
	}
	_ = b.Flush()
}

func (r Report) syncersText(out io.Writer) {
	if len(r.Syncers) == 0 {
		_, _ = io.WriteString(out, "\nno mcs-syncer read: the members' health, heartbeats and versions are unknown (they are read from the\n"+
			"mcs-syncer Pods of the members, or from --syncer, the probe address of one that runs elsewhere)\n")
		return
	}
	b := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = io.WriteString(b, "\nMCS-SYNCER\tRUNS FOR\tVERSION\tLEADING\tERROR\n")
	for _, s := range r.Syncers {
		fmt.Fprintf(b, "%s\t%s\t%s\t%v\t%s\n", s.Name, cmp.Or(s.Cluster, "every member"), cmp.Or(s.Version, "-"), s.Leading, cmp.Or(s.Error, "-"))
	}
	_ = b.Flush()
}

func (r Report) servicesText(out io.Writer, wide bool) {
	b := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "\nSERVICE\tEXPORTED BY\tCONSUMER\tIMPORTED\tIPS\tREADY\tENDPOINTS (imported/exported)"
	if wide {
		header += "\tTYPE\tCLUSTERS"
	}
	_, _ = io.WriteString(b, header+"\n")
	for _, s := range r.Services {
		name := s.Namespace + "/" + s.Name
		for _, i := range s.Imports {
			var eps []string
			for _, e := range i.Endpoints {
				ep := fmt.Sprintf("%s %d/%d", e.Source, e.Imported, e.Exported)
				if e.Unimportable > 0 {
					ep += fmt.Sprintf(" (+%d unimportable)", e.Unimportable)
				}
				eps = append(eps, ep)
			}
			fmt.Fprintf(b, "%s\t%s\t%s\t%v\t%s\t%s\t%s", name, cmp.Or(strings.Join(s.ExportedBy, ","), "-"), i.Consumer, i.Imported,
				cmp.Or(strings.Join(i.IPs, ","), "-"), cmp.Or(i.Ready, "-"), cmp.Or(strings.Join(eps, ", "), "-"))
			if wide {
				fmt.Fprintf(b, "\t%s\t%s", cmp.Or(i.Type, "-"), cmp.Or(strings.Join(i.Clusters, ","), "-"))
			}
			_, _ = io.WriteString(b, "\n")
		}
		for _, c := range s.Conflicts {
			fmt.Fprintf(b, "%s\tconflict: %s\n", name, c)
		}
	}
	_ = b.Flush()
}
