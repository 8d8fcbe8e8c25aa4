package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
)

// probeTimeout bounds one probe of a member.
const probeTimeout = 5 * time.Second

// requiredAPI is an API a member must serve to be engaged.
type requiredAPI struct {
	// versions are the versions that do, the preferred first: the member
	// is engaged on the first it serves.
	versions  []schema.GroupVersion
	resources []string
	// what names it in messages; install says how to get it.
	what, install string
}

// mcsAPIOf is the MCS API as the members whose ServiceExports are read, or
// into which mcs-syncer imports, must serve it: in one of the versions
// opts has a scheme for.
func mcsAPIOf(opts Options) requiredAPI {
	api := requiredAPI{resources: mcsapi.Resources, what: "the MCS API", install: "install sigs.k8s.io/mcs-api's config/crd"}
	for _, gv := range mcsapi.Versions {
		if _, ok := opts.MCSSchemes[gv]; ok {
			api.versions = append(api.versions, gv)
		}
	}
	if len(api.versions) == 0 {
		gv, ok := mcsapi.Version(opts.Scheme)
		if !ok {
			gv = mcsapi.V1beta1
		}
		api.versions = []schema.GroupVersion{gv}
	}
	return api
}

// publicationAPI is read from the members (or the hub) whose publications
// are read.
var publicationAPI = requiredAPI{
	versions: []schema.GroupVersion{v1alpha1.GroupVersion}, resources: []string{v1alpha1.Resource},
	what: "mcs-syncer's publications", install: "install config/crd/mcs-syncer.io_publishedexports.yaml",
}

// healthCheck asks a member's API server whether it can be engaged.
type healthCheck struct {
	rest      rest.Interface
	discovery discovery.DiscoveryInterface
	api       requiredAPI

	mu      sync.Mutex
	version schema.GroupVersion // of the last probe that found the API served
}

func newHealthCheck(rc *rest.Config, api requiredAPI) (prober, error) {
	// A bounded request: one on a connection to a server that died can
	// otherwise wait for HTTP/2's ping timeouts (seen: two minutes).
	rc = rest.CopyConfig(rc)
	rc.Timeout = probeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &healthCheck{rest: dc.RESTClient(), discovery: dc, api: api}, nil
}

// probe probes the member's /readyz, then whether it serves the API it
// needs, in which version; on failure it returns the member's state and
// why.
func (h *healthCheck) probe(ctx context.Context) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// Do, not DoRaw: DoRaw's error drops the API Status of a refusal
	// (seen: members logged forbidden with the cause "unknown" while the
	// hub's API server started and its RBAC roles were not loaded yet).
	if err := h.rest.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		var status apierrors.APIStatus
		var plugin *credentials.Error
		if errors.As(err, &plugin) {
			return Failed, plugin
		}
		if errors.As(err, &status) && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			return Forbidden, fmt.Errorf("probe /readyz: %w", err)
		}
		return Unreachable, fmt.Errorf("probe /readyz: %w", err)
	}
	gv, err := mcsapi.FirstServed(h.discovery, h.api.resources, h.api.versions...)
	var missing *mcsapi.MissingError
	switch {
	case errors.As(err, &missing):
		return MissingCRDs, fmt.Errorf("%s is not served: %w (%s)", h.api.what, err, h.api.install)
	case err != nil:
		return Unreachable, err
	}
	h.mu.Lock()
	h.version = gv
	h.mu.Unlock()
	return Engaged, nil
}

// served is the version of the API the last successful probe found.
func (h *healthCheck) served() schema.GroupVersion {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// identity reads the UID of the kube-system namespace (credentials that
// may not read it leave the cluster known by its address only).
func (h *healthCheck) identity(ctx context.Context) types.UID {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	raw, err := h.rest.Get().AbsPath("/api/v1/namespaces/kube-system").DoRaw(ctx)
	var ns corev1.Namespace
	if err != nil || json.Unmarshal(raw, &ns) != nil {
		return ""
	}
	return ns.UID
}
