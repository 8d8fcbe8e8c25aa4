package publish

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ObjectName is the name of cluster's publication of key:
// <cluster>.<namespace>.<name>, unique in a namespace that every member
// publishes into: namespace and name are DNS labels, so a name of four
// labels is a two-label cluster ID's and one of three a one-label ID's.
// It is a valid DNS subdomain of at most 191 characters (a cluster ID has
// at most 63).
func ObjectName(cluster clusterset.ClusterID, key types.NamespacedName) string {
	return string(cluster) + "." + key.Namespace + "." + key.Name
}

// MarkerName is the name of cluster's marker.
func MarkerName(cluster clusterset.ClusterID) string { return string(cluster) }

// IsMarker reports whether p is a member's marker rather than an export:
// named after its cluster, without a Service. (A publication without a
// Service under another name is neither: Decode refuses it.)
func IsMarker(p *v1alpha1.PublishedExport) bool {
	return p.Spec.Namespace == "" && p.Spec.Name == "" && p.Name == MarkerName(clusterset.ClusterID(p.Spec.Cluster))
}

// Encode returns the publication of an export into namespace as one
// object, its endpoints in its head (the form that readers before parts
// read).
func Encode(es *clusterset.ExportedService, namespace string) *v1alpha1.PublishedExport {
	p := EncodeHead(es, namespace)
	for _, g := range es.Endpoints {
		p.Spec.Endpoints = append(p.Spec.Endpoints, v1alpha1.EndpointGroup(g))
	}
	return p
}

// EncodeHead returns the head of an export's publication into namespace:
// all of it but its endpoints.
func EncodeHead(es *clusterset.ExportedService, namespace string) *v1alpha1.PublishedExport {
	s := &es.Spec
	p := &v1alpha1.PublishedExport{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PublishedExport"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: ObjectName(es.Cluster, es.Key),
			Labels: publicationLabels(es.Cluster, es.Key),
		},
		Spec: v1alpha1.PublishedExportSpec{
			Cluster: string(es.Cluster), Namespace: es.Key.Namespace, Name: es.Key.Name,
			ExportCreated: es.ExportCreated, Type: s.Type, Ports: s.Ports,
			SessionAffinity: s.SessionAffinity, SessionAffinityConfig: s.SessionAffinityConfig,
			InternalTrafficPolicy: s.InternalTrafficPolicy, TrafficDistribution: s.TrafficDistribution,
			IPFamilies: s.IPFamilies, ExportedLabels: s.Labels, ExportedAnnotations: s.Annotations,
			LocalClusterFirst: s.LocalClusterFirst,
		},
	}
	p.Spec.LastChangeTriggerTime = formatTriggerTime(es.LastChangeTriggerTime)
	return p
}

// formatTriggerTime is a trigger time as publications carry it ("" for
// none).
func formatTriggerTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseTriggerTime reads a publication's spec.lastChangeTriggerTime.
func parseTriggerTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("spec.lastChangeTriggerTime %q is not an RFC 3339 time", s)
	}
	return t, nil
}

// Marker returns cluster's marker in namespace, renewed now if heartbeat
// (its renewal interval) is set.
func Marker(cluster clusterset.ClusterID, namespace string, heartbeat time.Duration) *v1alpha1.PublishedExport {
	return markerAt(cluster, namespace, heartbeat, time.Now())
}

// markerAt is Marker renewed at now.
func markerAt(cluster clusterset.ClusterID, namespace string, heartbeat time.Duration, now time.Time) *v1alpha1.PublishedExport {
	p := &v1alpha1.PublishedExport{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PublishedExport"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: MarkerName(cluster),
			Labels: map[string]string{mcsv1beta1.LabelSourceCluster: string(cluster)},
		},
		Spec: v1alpha1.PublishedExportSpec{Cluster: string(cluster), ReadsParts: true},
	}
	if heartbeat > 0 {
		renewed := metav1.NewMicroTime(now)
		p.Spec.RenewTime, p.Spec.RenewIntervalSeconds = &renewed, intervalSeconds(heartbeat)
	}
	return p
}

// intervalSeconds is a marker's renewal interval as it is published.
func intervalSeconds(heartbeat time.Duration) int32 {
	return int32(max(1, heartbeat/time.Second))
}

// Decode turns a publication read from a publication server back into an
// export, checking every field a consumer uses: a publication is another
// cluster's input. The export shares p's slices and maps; neither may be
// modified afterwards. A marker is refused (check IsMarker first).
func Decode(p *v1alpha1.PublishedExport) (*clusterset.ExportedService, error) {
	s := &p.Spec
	if IsPart(p) {
		return nil, fmt.Errorf("%s is part %s of a publication, not its head", p.Name, s.Part)
	}
	cluster, err := sourceCluster(p)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("spec.namespace %q: %s", s.Namespace, strings.Join(errs, "; "))
	}
	// A Service's name is a DNS-1123 label in the Kubernetes we pin
	// (KEP-5311, RelaxedServiceNameValidation, on by default since 1.34:
	// "1web" is a Service); DNS-1035 refused such exports, which the
	// exporter's API server had taken.
	if errs := validation.IsDNS1123Label(s.Name); len(errs) > 0 {
		return nil, fmt.Errorf("spec.name %q: %s", s.Name, strings.Join(errs, "; "))
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if want := ObjectName(cluster, key); p.Name != want {
		return nil, fmt.Errorf("name %q: the publication of %s from %s is named %q", p.Name, key, cluster, want)
	}
	if err := errors.Join(checkSpec(s), checkEndpoints(s.Endpoints), checkPartIDs(s.Parts)); err != nil {
		return nil, err
	}
	es := &clusterset.ExportedService{
		Cluster: cluster, Key: key, ExportCreated: s.ExportCreated,
		Spec: clusterset.ExportedSpec{
			Type: s.Type, Ports: s.Ports, SessionAffinity: s.SessionAffinity,
			SessionAffinityConfig: s.SessionAffinityConfig, InternalTrafficPolicy: s.InternalTrafficPolicy,
			TrafficDistribution: s.TrafficDistribution, IPFamilies: s.IPFamilies,
			Labels: s.ExportedLabels, Annotations: s.ExportedAnnotations, LocalClusterFirst: s.LocalClusterFirst,
		},
	}
	es.Endpoints = decodedGroups(s.Endpoints)
	if es.LastChangeTriggerTime, err = parseTriggerTime(s.LastChangeTriggerTime); err != nil {
		return nil, err
	}
	return es, nil
}

// decodedGroups are a publication's endpoint groups, checked, as the
// import side takes them (nil for none); they share groups' slices.
func decodedGroups(groups []v1alpha1.EndpointGroup) []reconciler.EndpointGroup {
	if len(groups) == 0 {
		return nil
	}
	out := make([]reconciler.EndpointGroup, len(groups))
	for i, g := range groups {
		out[i] = reconciler.EndpointGroup(g)
	}
	return out
}

// sourceCluster checks a head's or part's cluster ID and that its
// source-cluster label says the same.
func sourceCluster(p *v1alpha1.PublishedExport) (clusterset.ClusterID, error) {
	cluster, err := clusterset.ParseClusterID(p.Spec.Cluster)
	if err != nil {
		return "", fmt.Errorf("spec.cluster: %w", err)
	}
	if got := p.Labels[mcsv1beta1.LabelSourceCluster]; got != p.Spec.Cluster {
		return "", fmt.Errorf("label %s is %q, spec.cluster %q", mcsv1beta1.LabelSourceCluster, got, p.Spec.Cluster)
	}
	return cluster, nil
}

// checkPartIDs checks a head's spec.parts: the IDs of its parts, each a
// DNS label (a part's name ends in it), each once.
func checkPartIDs(ids []string) error {
	// A publisher lists them in order (comparePartIDs): an ID named twice
	// is then next to itself, and no set of them is built.
	var seen map[string]bool
	sorted := slices.IsSortedFunc(ids, comparePartIDs)
	if !sorted {
		seen = make(map[string]bool, len(ids))
	}
	for i, id := range ids {
		if isDNSLabel(id) {
			// Checked by hand: the regular expression took half of the
			// publisher's work for one endpoint's change of 50,000 (500
			// parts named in the head).
		} else if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			return fmt.Errorf("spec.parts[%d] %q: %s", i, id, strings.Join(errs, "; "))
		}
		if (sorted && i > 0 && ids[i-1] == id) || seen[id] {
			return fmt.Errorf("spec.parts[%d] %q: named twice", i, id)
		}
		if !sorted {
			seen[id] = true
		}
	}
	return nil
}

// isDNSLabel reports whether s is an RFC 1123 label, as
// validation.IsDNS1123Label checks it: 1 to 63 lower-case letters, digits
// and '-', starting and ending with a letter or digit.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// checkSpec checks the exported Service's properties.
func checkSpec(s *v1alpha1.PublishedExportSpec) error {
	return errors.Join(errors.Join(checkTypeAndPorts(s)...), errors.Join(checkTrafficFields(s)...), errors.Join(checkExportedKeys(s)...))
}

// checkTypeAndPorts checks spec.type and spec.ports.
func checkTypeAndPorts(s *v1alpha1.PublishedExportSpec) (errs []error) {
	if s.Type != mcsv1beta1.ClusterSetIP && s.Type != mcsv1beta1.Headless {
		errs = append(errs, fmt.Errorf("spec.type %q is neither %s nor %s", s.Type, mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless))
	}
	if s.Type == mcsv1beta1.ClusterSetIP && len(s.Ports) == 0 {
		// No Service but a headless one has none; a derived Service
		// without a port is refused by every consumer's API server.
		errs = append(errs, errors.New("spec.ports: a ClusterSetIP export has none"))
	}
	if len(s.Ports) > MaxPorts {
		errs = append(errs, fmt.Errorf("spec.ports: %d ports, over the %d that an EndpointSlice may carry", len(s.Ports), MaxPorts))
	}
	for i, p := range s.Ports {
		if err := checkPort(p.Name, p.Port, p.Protocol); err != nil {
			errs = append(errs, fmt.Errorf("spec.ports[%d]: %w", i, err))
		}
	}
	return errs
}

// checkTrafficFields checks the fields that steer traffic: session
// affinity, internal traffic policy, IP families.
func checkTrafficFields(s *v1alpha1.PublishedExportSpec) (errs []error) {
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		errs = append(errs, fmt.Errorf("spec.sessionAffinity %q is unknown", s.SessionAffinity))
	}
	if p := s.InternalTrafficPolicy; p != nil && *p != corev1.ServiceInternalTrafficPolicyCluster && *p != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, fmt.Errorf("spec.internalTrafficPolicy %q is unknown", *p))
	}
	if len(s.IPFamilies) > 2 {
		errs = append(errs, fmt.Errorf("spec.ipFamilies: %d families", len(s.IPFamilies)))
	}
	for _, f := range s.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, fmt.Errorf("spec.ipFamilies: %q is unknown", f))
		}
	}
	return errs
}

// checkExportedKeys checks the exported labels and annotations: keys of
// their own (never a reserved one), values a label may have, annotations
// within their size.
func checkExportedKeys(s *v1alpha1.PublishedExportSpec) (errs []error) {
	for k, v := range s.ExportedLabels {
		if bad := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(bad) > 0 || clusterset.Reserved(k) {
			errs = append(errs, fmt.Errorf("spec.exportedLabels[%q]: not a label of its own (%s)", k, strings.Join(bad, "; ")))
		}
	}
	for k := range s.ExportedAnnotations {
		if bad := validation.IsQualifiedName(strings.ToLower(k)); len(bad) > 0 || clusterset.Reserved(k) {
			errs = append(errs, fmt.Errorf("spec.exportedAnnotations[%q]: not an annotation of its own (%s)", k, strings.Join(bad, "; ")))
		}
	}
	if _, refused := clusterset.OversizedAnnotations(s.ExportedAnnotations); len(refused) > 0 {
		errs = append(errs, fmt.Errorf("spec.exportedAnnotations: %s", refused[0]))
	}
	return errs
}

// MaxPorts bounds the ports of a publication: an EndpointSlice carries at
// most 100 (the discovery API's validation), so an import with more could
// not carry its endpoints.
const MaxPorts = 100

// checkEndpoints checks the endpoint groups' address types, ports and
// addresses (the rest is checked by the consumer's API server when the
// slices are written).
func checkEndpoints(groups []v1alpha1.EndpointGroup) error {
	var errs []error
	for i, g := range groups {
		var family func(netip.Addr) bool
		switch g.AddressType {
		case discoveryv1.AddressTypeIPv4:
			family = netip.Addr.Is4
		case discoveryv1.AddressTypeIPv6:
			family = func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
		case discoveryv1.AddressTypeFQDN:
			// Carried as a central mcs-syncer carries them: the import
			// side leaves them out and counts them (no import has the
			// address type), rather than every reader refusing the export.
		default:
			errs = append(errs, fmt.Errorf("spec.endpoints[%d].addressType %q is not IPv4, IPv6 or FQDN", i, g.AddressType))
			continue
		}
		errs = append(errs, checkGroupPorts(i, g.Ports)...)
		errs = append(errs, checkGroupAddresses(i, g, family)...)
	}
	return errors.Join(errs...)
}

// checkGroupPorts checks the ports of group i.
func checkGroupPorts(i int, ports []discoveryv1.EndpointPort) (errs []error) {
	for j, p := range ports {
		if p.Port == nil || p.Protocol == nil {
			errs = append(errs, fmt.Errorf("spec.endpoints[%d].ports[%d]: port and protocol are required", i, j))
			continue
		}
		if err := checkPort(ptr.Deref(p.Name, ""), *p.Port, *p.Protocol); err != nil {
			errs = append(errs, fmt.Errorf("spec.endpoints[%d].ports[%d]: %w", i, j, err))
		}
	}
	return errs
}

// checkGroupAddresses checks that every endpoint of group i has an
// address, and (family set) that each is of the group's family.
func checkGroupAddresses(i int, g v1alpha1.EndpointGroup, family func(netip.Addr) bool) (errs []error) {
	for j, e := range g.Endpoints {
		if len(e.Addresses) == 0 {
			errs = append(errs, fmt.Errorf("spec.endpoints[%d].endpoints[%d]: no address", i, j))
		}
		if family == nil {
			continue
		}
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err != nil || !family(ip) || ip.Zone() != "" {
				errs = append(errs, fmt.Errorf("spec.endpoints[%d].endpoints[%d]: %q is not an %s address", i, j, a, g.AddressType))
			}
		}
	}
	return errs
}

func checkPort(name string, port int32, protocol corev1.Protocol) error {
	if name != "" {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
		}
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is outside 1..65535", port)
	}
	switch protocol {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return fmt.Errorf("protocol %q is unknown", protocol)
}
