package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/diagnose"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// clustersetFlags say where the members are: mcs-syncer's config, or the
// contexts of a kubeconfig (kube's).
type clustersetFlags struct {
	kube             *kubeFlags
	config, contexts string
	// hubKubeconfig is the hub's (hub mode), beside or instead of the
	// config's.
	hubKubeconfig string
}

func (f *clustersetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "clusterset-config", "", "mcs-syncer's clusterset config file: its members, as mcs-syncer reads them (instead of --kubeconfig's contexts).")
	fs.StringVar(&f.contexts, "contexts", "", "Comma-separated contexts of --kubeconfig, the members (default every context).")
	fs.StringVar(&f.hubKubeconfig, "hub-kubeconfig", "", "Hub mode: the hub's kubeconfig (its current context), instead of that of --clusterset-config; a hub administrator's lets diagnose check every member's hub identity.")
}

// memberConn is a member and how to reach its API server (nil: it is read
// through the hub, and not reached here).
type memberConn struct {
	id   string
	rest *rest.Config
}

// members returns the clusterset's members, and the ClusterProfiles of
// the config's inventory left out of them, each as "ClusterProfile
// namespace/name: why".
func (f clustersetFlags) members(ctx context.Context) ([]memberConn, []string, error) {
	perRequest, err := f.kube.requestTimeout()
	if err != nil {
		return nil, nil, err
	}
	if f.kube.overrides.CurrentContext != "" {
		return nil, nil, errors.New("--context names the one cluster of export and unexport: name the members with --contexts")
	}
	if f.config != "" {
		if f.kube.kubeconfig != "" || f.contexts != "" {
			return nil, nil, errors.New("--clusterset-config or --kubeconfig, not both")
		}
		return fromConfig(ctx, f.config, perRequest)
	}
	conns, err := fromKubeconfig(f.kube.kubeconfig, f.contexts, perRequest)
	return conns, nil, err
}

// sayLeftOut writes to w, a line each, the profiles of the inventory that
// command left out: what it reports is of the others only.
func sayLeftOut(w io.Writer, command string, leftOut []string) {
	for _, p := range leftOut {
		fmt.Fprintf(w, "kubectl mcs %s: inventory: left out %s\n", command, p)
	}
}

// fromConfig reads mcs-syncer's config: each member with connection
// settings of its own (those of its inventory's profiles included, read
// once); one read through the hub has none here. Each request waits
// perRequest at most (0: requestTimeout).
func fromConfig(ctx context.Context, path string, perRequest time.Duration) ([]memberConn, []string, error) {
	cfg, err := membership.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, leftOut, err := membership.ReadInventory(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	var members []memberConn
	for i := range cfg.Members {
		m := &cfg.Members[i]
		if m.ID == "" {
			return nil, nil, fmt.Errorf("member %d has no id (its cluster names itself): kubectl mcs needs the IDs in the config", i+1)
		}
		if m.ThroughHub {
			members = append(members, memberConn{id: string(m.ID)})
			continue
		}
		rc, err := m.RESTConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("member %s: %w", m.ID, err)
		}
		rc.Timeout = perRequest
		members = append(members, memberConn{id: string(m.ID), rest: rc})
	}
	return members, leftOut, nil
}

// hubConn is the hub of hub mode and the publications' namespace there.
type hubConn struct {
	rest      *rest.Config
	namespace string
}

// hub returns the hub: --hub-kubeconfig's, or that of mcs-syncer's config
// (through which the members without connection settings of their own are
// read); nil without one.
func (f clustersetFlags) hub() (*hubConn, error) {
	var cfg *membership.Config
	if f.config != "" {
		var err error
		if cfg, err = membership.LoadConfig(f.config); err != nil {
			return nil, err
		}
	}
	namespace := membership.DefaultPublicationNamespace
	if cfg != nil {
		namespace = cmp.Or(cfg.PublicationNamespace, namespace)
	}
	perRequest, err := f.kube.requestTimeout()
	if err != nil {
		return nil, err
	}
	var rc *rest.Config
	switch {
	case f.hubKubeconfig != "":
		if rc, err = clientcmd.BuildConfigFromFlags("", f.hubKubeconfig); err != nil {
			return nil, fmt.Errorf("--hub-kubeconfig: %w", err)
		}
	case cfg != nil && cfg.Hub != nil:
		if rc, err = cfg.Hub.RESTConfig(); err != nil {
			return nil, fmt.Errorf("hub: %w", err)
		}
	default:
		return nil, nil
	}
	rc.Timeout = perRequest
	return &hubConn{rest: rc, namespace: namespace}, nil
}

// statusHub returns the hub as status reads it (nil: none), its requests
// bounded as a command's of total (its --timeout).
func (h *hubConn) statusHub(total time.Duration) (*status.Hub, error) {
	if h == nil {
		return nil, nil
	}
	c, err := newClient(h.rest, requestWithin(h.rest, total))
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	return &status.Hub{Client: c, Namespace: h.namespace}, nil
}

// fromKubeconfig reads each context of a kubeconfig as a member, each
// request waiting perRequest at most (0: requestTimeout).
func fromKubeconfig(path, contexts string, perRequest time.Duration) ([]memberConn, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, err
	}
	var names []string
	if contexts != "" {
		names = strings.Split(contexts, ",")
	} else {
		for name := range raw.Contexts {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no context: give --clusterset-config, or a kubeconfig with a context per member")
	}
	var members []memberConn
	for _, name := range slices.Sorted(slices.Values(names)) {
		if _, ok := raw.Contexts[name]; !ok {
			return nil, fmt.Errorf("--contexts: the kubeconfig has no context %q", name)
		}
		rc, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", name, err)
		}
		rc.Timeout = perRequest
		members = append(members, memberConn{id: name, rest: rc})
	}
	return members, nil
}

// requestTimeout bounds each request unless --request-timeout says
// otherwise (in rest.Config.Timeout): one member that does not answer
// holds a report for this long at most per request (never longer than
// the command's --timeout: requestWithin).
const requestTimeout = 10 * time.Second

// requestWithin is the bound of each request to rc's API server of a
// command given total (its --timeout) in all.
func requestWithin(rc *rest.Config, total time.Duration) time.Duration {
	perRequest := rc.Timeout
	if perRequest <= 0 {
		perRequest = requestTimeout
	}
	return min(perRequest, total)
}

func newClient(rc *rest.Config, timeout time.Duration) (client.Client, error) {
	return client.New(withTimeout(rc, timeout), client.Options{Scheme: scheme})
}

// newMemberClient returns a client of a member that speaks the version of
// the MCS API the member serves (internal/mcsapi), and that version; a
// member that serves none, or cannot be asked within discover, gets
// v1beta1's, whose lists then fail with its server's answer. Its requests
// time out after timeout.
func newMemberClient(rc *rest.Config, discover, timeout time.Duration) (client.Client, schema.GroupVersion, error) {
	gv := mcsapi.V1beta1
	if dc, err := discovery.NewDiscoveryClientForConfig(withTimeout(rc, discover)); err == nil {
		if served, err := mcsapi.Served(dc); err == nil {
			gv = served
		}
	}
	c, err := client.New(withTimeout(rc, timeout), client.Options{Scheme: schemes[gv]})
	return c, gv, err
}

// memberClient is a member's client as newMemberClient returns it.
type memberClient struct {
	client client.Client
	gv     schema.GroupVersion
	err    error
}

// newMemberClients returns newMemberClient of each of conns (nil ones
// left zero), all asked at once, within half of total (a command's
// --timeout): a member that does not answer costs the others no more than
// that, and leaves them the other half for their reads.
func newMemberClients(conns []memberConn, total time.Duration) []memberClient {
	out := make([]memberClient, len(conns))
	var wg sync.WaitGroup
	for i, m := range conns {
		if m.rest == nil {
			continue
		}
		wg.Go(func() {
			c, gv, err := newMemberClient(m.rest, requestWithin(m.rest, total/2), requestWithin(m.rest, total))
			out[i] = memberClient{client: c, gv: gv, err: err}
		})
	}
	wg.Wait()
	return out
}

// withTimeout returns a copy of rc whose requests time out after timeout.
func withTimeout(rc *rest.Config, timeout time.Duration) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.Timeout = timeout
	return rc
}

// statusMembers returns the members as status reads them, within total
// (the command's --timeout).
func statusMembers(conns []memberConn, total time.Duration) ([]status.Member, error) {
	var members []status.Member
	clients := newMemberClients(conns, total)
	for i, m := range conns {
		if m.rest == nil {
			members = append(members, status.Member{ID: m.id})
			continue
		}
		c := clients[i]
		if c.err != nil {
			return nil, fmt.Errorf("member %s: %w", m.id, c.err)
		}
		cs, err := kubernetes.NewForConfig(withTimeout(m.rest, requestWithin(m.rest, total)))
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.id, err)
		}
		members = append(members, status.Member{ID: m.id, Client: c.client, Syncers: podSyncers(m.id, c.client, clientsetPods{cs}), MCSAPI: c.gv.String()})
	}
	return members, nil
}

// diagnoseMembers returns the members diagnose can reach, and the IDs of
// those it cannot (read through the hub), within total (the command's
// --timeout).
func diagnoseMembers(conns []memberConn, total time.Duration) ([]diagnose.Member, []string, error) {
	var members []diagnose.Member
	var throughHub []string
	clients := newMemberClients(conns, total)
	for i, m := range conns {
		if m.rest == nil {
			throughHub = append(throughHub, m.id)
			continue
		}
		if clients[i].err != nil {
			return nil, nil, fmt.Errorf("member %s: %w", m.id, clients[i].err)
		}
		rc := withTimeout(m.rest, requestWithin(m.rest, total))
		dc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("member %s: %w", m.id, err)
		}
		creds, err := credentialsOf(m.rest, requestWithin(m.rest, total))
		if err != nil {
			return nil, nil, fmt.Errorf("member %s: %w", m.id, err)
		}
		members = append(members, diagnose.Member{ID: m.id, Client: clients[i].client, Discovery: dc, ServerTime: serverTime(rc), Credentials: creds})
	}
	return members, throughHub, nil
}

// serverTime returns the clock of rc's API server: the Date header of its
// /version.
func serverTime(rc *rest.Config) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			return time.Time{}, err
		}
		host := rc.Host
		if !strings.Contains(host, "://") {
			host = "https://" + host
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+rc.APIPath+"/version", nil)
		if err != nil {
			return time.Time{}, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return time.Time{}, err
		}
		_ = resp.Body.Close()
		return http.ParseTime(resp.Header.Get("Date"))
	}
}
