package diagnose

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
)

// Member is a member as the checks reach it.
type Member struct {
	ID        string
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	// ServerTime returns the member's API server's clock (its Date
	// header).
	ServerTime func(context.Context) (time.Time, error)
	// Credentials are those of the member's client config (nil: the
	// credentials check is skipped).
	Credentials *Credentials
}

// Result is one check's outcome.
type Result string

// The outcomes of a check.
const (
	Pass Result = "pass"
	Fail Result = "fail"
	Skip Result = "skip"
	// Warn is a check that passes for now and will not for long (it
	// says what to do, and does not fail the command).
	Warn Result = "warn"
)

// Check is one check of one member, or of the clusterset (Member "").
type Check struct {
	Name   string `json:"name"`
	Member string `json:"member,omitempty"`
	Result Result `json:"result"`
	Detail string `json:"detail"`
	// Fix says what to do, for a failure.
	Fix string `json:"fix,omitempty"`
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	return slices.ContainsFunc(checks, func(c Check) bool { return c.Result == Fail })
}

// Run runs every check on members; now is the local clock.
func Run(ctx context.Context, members []Member, now func() time.Time) []Check {
	var checks []Check
	for _, m := range members {
		checks = append(checks, crds(m), storedVersions(ctx, m), coreDNS(ctx, m), credentials(ctx, m, now()))
	}
	checks = append(checks, overlaps(ctx, members)...)
	checks = append(checks, syncers(ctx, members)...)
	checks = append(checks, clocks(ctx, members, now))
	return checks
}

// unreadable is what to do about a member that did not answer a check.
const unreadable = "check that the member's API server answers and that the credentials may read what the check names"

// mcsGroup is the MCS API's group.
const mcsGroup = "multicluster.x-k8s.io"

// crds checks that the member serves the MCS API fully in a version
// mcs-syncer speaks (internal/mcsapi), and says which: mcs-syncer reads
// and writes the preferred one there.
func crds(m Member) Check {
	c := Check{Name: "MCS CRDs", Member: m.ID}
	var served, missing []string
	for _, gv := range mcsapi.Versions {
		_, err := mcsapi.FirstServed(m.Discovery, mcsapi.Resources, gv)
		var lacks *mcsapi.MissingError
		switch {
		case err == nil:
			served = append(served, gv.Version)
		case errors.As(err, &lacks):
			missing = append(missing, lacks.Missing[gv]...)
		default:
			c.Result, c.Detail, c.Fix = Fail, err.Error(), unreadable
			return c
		}
	}
	switch len(served) {
	case 0:
		c.Result, c.Detail = Fail, "not served in any version mcs-syncer speaks (v1beta1, v1alpha1): "+strings.Join(missing, ", ")
		c.Fix = "kubectl apply -k config/crd (sigs.k8s.io/mcs-api's CRDs)"
	case len(mcsapi.Versions):
		c.Result, c.Detail = Pass, "ServiceExport and ServiceImport served in v1beta1 and v1alpha1; mcs-syncer uses v1beta1"
	default:
		c.Result, c.Detail = Pass, fmt.Sprintf("ServiceExport and ServiceImport served in %s only; mcs-syncer uses %s (not served: %s)",
			served[0], served[0], strings.Join(missing, ", "))
	}
	return c
}

// coreDNS checks the CoreDNS that kubeadm and kind run: ConfigMap
// kube-system/coredns and service account kube-system/coredns.
func coreDNS(ctx context.Context, m Member) Check {
	c := Check{Name: "CoreDNS answers clusterset.local", Member: m.ID}
	cm := &corev1.ConfigMap{}
	if err := m.Client.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "coredns"}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			c.Result, c.Detail = Skip, "no ConfigMap kube-system/coredns: the cluster's DNS is not the CoreDNS of kubeadm or kind; check that it answers clusterset.local"
			return c
		}
		c.Result, c.Detail, c.Fix = Fail, err.Error(), unreadable
		return c
	}
	if !servedWith(cm.Data["Corefile"], "clusterset.local", "multicluster") {
		c.Result, c.Detail = Fail, "the Corefile of kube-system/coredns has no multicluster plugin in a server block for clusterset.local (its own, or . as kubeadm's): <svc>.<ns>.svc.clusterset.local is not answered"
		c.Fix = "add `multicluster clusterset.local` to its server block, and a CoreDNS built with the plugin (docs/user-guide.md, DNS)"
		return c
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:kube-system:coredns",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: mcsGroup, Resource: "serviceimports", Verb: "list"}}}
	if err := m.Client.Create(ctx, sar); err != nil {
		c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("ask whether CoreDNS may list ServiceImports: %v", err), unreadable+" (and create SubjectAccessReviews)"
		return c
	}
	if !sar.Status.Allowed {
		c.Result, c.Detail = Fail, "the Corefile has multicluster, but kube-system/coredns may not list ServiceImports"
		c.Fix = "grant its ClusterRole get, list and watch on serviceimports." + mcsGroup
		return c
	}
	c.Result, c.Detail = Pass, "the Corefile has multicluster, and CoreDNS may list ServiceImports"
	return c
}

// servedWith reports whether a Corefile has a server block for zone (its
// keys name zone, a parent of it or the root) that uses plugin (a line of
// the block, not of a nested plugin block, that starts with its name). A
// plugin in a block of other zones answers nothing of zone: CoreDNS sends
// each query to the block of the longest zone that matches.
func servedWith(corefile, zone, plugin string) bool {
	depth, serves := 0, false
	for _, line := range strings.Split(corefile, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if depth == 0 && strings.HasSuffix(line, "{") {
			serves = false
			for _, key := range strings.FieldsFunc(strings.TrimSuffix(strings.TrimSpace(line), "{"), func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
				serves = serves || zoneCovers(key, zone)
			}
		} else if depth == 1 && serves && f[0] == plugin {
			return true
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
	}
	return false
}

// zoneCovers reports whether a server block's key (dns://zone:port, or
// zone:port) covers zone.
func zoneCovers(key, zone string) bool {
	key = strings.TrimPrefix(key, "dns://")
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		key = key[:i]
	}
	key = strings.TrimSuffix(key, ".")
	return key == "" || zone == key || strings.HasSuffix(zone, "."+key)
}

// cidr is a member's pod or service range.
type cidr struct {
	member, what string
	prefix       netip.Prefix
}

// overlaps checks that no pod or service range of a member overlaps one of
// another member: kube-proxy would send an imported endpoint's traffic to
// a local pod, or a clusterset IP would be a local Service's.
func overlaps(ctx context.Context, members []Member) []Check {
	var ranges []cidr
	var checks []Check
	for _, m := range members {
		got, err := cidrsOf(ctx, m)
		if err != nil {
			checks = append(checks, Check{Name: "pod and service CIDRs", Member: m.ID, Result: Fail, Detail: err.Error(), Fix: unreadable})
			continue
		}
		ranges = append(ranges, got...)
		if len(got) > 0 {
			checks = append(checks, addressRanges(m.ID, got))
		}
	}
	c := Check{Name: "pod and service CIDRs do not overlap between members"}
	var clashes []string
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.member != b.member && a.prefix.Overlaps(b.prefix) {
				clashes = append(clashes, fmt.Sprintf("%s's %s %s and %s's %s %s", a.member, a.what, a.prefix, b.member, b.what, b.prefix))
			}
		}
	}
	switch {
	case len(clashes) > 0:
		c.Result, c.Detail = Fail, "overlap: "+strings.Join(clashes, "; ")
		c.Fix = "give each member ranges of its own (pod IPs are imported as they are; there is no NAT)"
	case len(ranges) == 0:
		c.Result, c.Detail = Skip, "no member says its ranges (no node has spec.podCIDRs, no ServiceCIDR object)"
	default:
		c.Result, c.Detail = Pass, fmt.Sprintf("%d ranges of %d members, none shared", len(ranges), len(members))
	}
	return append(checks, c)
}

// addressRanges says a member's ranges as its entry of the clusterset
// config takes them (members[].addressRanges: docs/configuration.md,
// "Address ranges"), each once, in the order found.
func addressRanges(member string, ranges []cidr) Check {
	var list []string
	for _, r := range ranges {
		if s := r.prefix.String(); !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return Check{Name: "address ranges", Member: member, Result: Pass,
		Detail: "addressRanges: [" + strings.Join(list, ", ") + "] (its nodes' pod CIDRs and its ServiceCIDRs: to limit the addresses it may publish, paste into its entry of the clusterset config, adding the node addresses of hostNetwork pods it exports)"}
}

// cidrsOf returns a member's node pod CIDRs and ServiceCIDRs.
func cidrsOf(ctx context.Context, m Member) ([]cidr, error) {
	var out []cidr
	var nodes corev1.NodeList
	if err := m.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, s := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, cidr{m.ID, "pod CIDR (node " + n.Name + ")", p.Masked()})
			}
		}
	}
	var services networkingv1.ServiceCIDRList
	if err := m.Client.List(ctx, &services); err != nil && !apierrors.IsNotFound(err) && !isNoKind(err) {
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	for _, s := range services.Items {
		for _, c := range s.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, cidr{m.ID, "service CIDR", p.Masked()})
			}
		}
	}
	return out, nil
}

// isNoKind reports an API server that does not serve a kind (ServiceCIDR
// before Kubernetes 1.33).
func isNoKind(err error) bool {
	return strings.Contains(err.Error(), "no matches for kind")
}

// syncers checks the mcs-syncer Deployments (app.kubernetes.io/name:
// mcs-syncer) of every member: ready, and all of one version.
func syncers(ctx context.Context, members []Member) []Check {
	var checks []Check
	versions := map[string][]string{}
	for _, m := range members {
		var list appsv1.DeploymentList
		if err := m.Client.List(ctx, &list, client.MatchingLabels{"app.kubernetes.io/name": "mcs-syncer"}); err != nil {
			checks = append(checks, Check{Name: "mcs-syncer running and ready", Member: m.ID, Result: Fail, Detail: err.Error(), Fix: unreadable})
			continue
		}
		for _, d := range list.Items {
			c := Check{Name: "mcs-syncer running and ready", Member: m.ID}
			image := ""
			if len(d.Spec.Template.Spec.Containers) > 0 {
				image = d.Spec.Template.Spec.Containers[0].Image
			}
			versions[image] = append(versions[image], m.ID)
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if d.Status.ReadyReplicas < want {
				c.Result, c.Detail = Fail, fmt.Sprintf("Deployment %s/%s (%s): %d of %d replicas ready", d.Namespace, d.Name, image, d.Status.ReadyReplicas, want)
				c.Fix = fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", d.Namespace, d.Name, d.Namespace, d.Name)
			} else {
				c.Result, c.Detail = Pass, fmt.Sprintf("Deployment %s/%s (%s): %d replicas ready", d.Namespace, d.Name, image, d.Status.ReadyReplicas)
			}
			checks = append(checks, c)
		}
	}
	c := Check{Name: "one mcs-syncer version in the clusterset"}
	switch {
	case len(versions) == 0:
		c.Result, c.Detail = Skip, "no member runs mcs-syncer as a Deployment labelled app.kubernetes.io/name=mcs-syncer (a process outside the clusters?)"
	case len(versions) > 1:
		var each []string
		for _, image := range slices.Sorted(maps.Keys(versions)) {
			each = append(each, fmt.Sprintf("%s in %s", image, strings.Join(versions[image], ",")))
		}
		c.Result, c.Detail = Fail, "several versions: "+strings.Join(each, "; ")
		c.Fix = "finish the upgrade: every member's mcs-syncer at one version"
	default:
		for image := range versions {
			c.Result, c.Detail = Pass, image
		}
	}
	return append(checks, c)
}

// maxClockSkew is the most two members' clocks may differ by: the Date
// header has a resolution of a second, and the requests take their time.
const maxClockSkew = 5 * time.Second

// clocks compares the members' clocks with the local one.
func clocks(ctx context.Context, members []Member, now func() time.Time) Check {
	c := Check{Name: "members' clocks agree"}
	var errs []error
	var earliest, latest time.Duration
	var earlyID, lateID string
	for _, m := range members {
		t, err := m.ServerTime(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.ID, err))
			continue
		}
		skew := t.Sub(now())
		if earlyID == "" || skew < earliest {
			earliest, earlyID = skew, m.ID
		}
		if lateID == "" || skew > latest {
			latest, lateID = skew, m.ID
		}
	}
	switch {
	case len(errs) > 0:
		c.Result, c.Detail, c.Fix = Fail, errors.Join(errs...).Error(), unreadable
	case latest-earliest > maxClockSkew:
		c.Result, c.Detail = Fail, fmt.Sprintf("%s's clock is %s ahead of %s's", lateID, (latest-earliest).Round(time.Second), earlyID)
		c.Fix = "run NTP (chrony, systemd-timesyncd) on every member's nodes: certificates and tokens are checked against them"
	default:
		c.Result, c.Detail = Pass, fmt.Sprintf("within %s of each other", maxClockSkew)
	}
	return c
}
