package membership

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// KEP-2149 (ClusterId for ClusterSet identification): a cluster may say who
// it is through cluster-scoped ClusterProperty objects of the API
// about.k8s.io/v1alpha1, each holding a string in spec.value. The Go module
// of that API is not served where mcs-syncer is built; the two fields read
// here are defined from the KEP's schema.
var clusterPropertyResource = schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}

const (
	// clusterIDProperty holds the cluster's ID in its clusterset.
	clusterIDProperty = "cluster.clusterset.k8s.io"
	// clustersetProperty holds the name of the clusterset it belongs to.
	clustersetProperty = "clusterset.k8s.io"
)

// clusterProperty is the part of a ClusterProperty that is read.
type clusterProperty struct {
	Spec struct {
		Value string `json:"value"`
	} `json:"spec"`
}

// claims is what a cluster says of itself through its ClusterProperties;
// "" where it says nothing (the CRD is not served, the property does not
// exist, or it may not be read).
type claims struct {
	id, clusterset string
}

// contradiction says how a member's claims contradict the clusterset config
// (nil when they do not): the config's ID for it and the clusterset's name.
func (c claims) contradiction(id clusterset.ClusterID, clustersetName string) error {
	switch {
	case c.id != "" && c.id != string(id):
		return fmt.Errorf("ClusterProperty %s of this cluster is %q, but the clusterset config names this member %q: it is another cluster, or the config is wrong", clusterIDProperty, c.id, id)
	case c.clusterset != "" && c.clusterset != clustersetName:
		return fmt.Errorf("ClusterProperty %s of this cluster is %q, but this is clusterset %q: the cluster belongs to another clusterset", clustersetProperty, c.clusterset, clustersetName)
	}
	return nil
}

// claims reads the cluster's ClusterProperties. A property the cluster does
// not have (or may not let mcs-syncer read) claims nothing; any other
// failure is returned.
func (h *healthCheck) claims(ctx context.Context) (claims, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	read := func(name string) (string, error) {
		raw, err := h.rest.Get().AbsPath("/apis", clusterPropertyResource.Group, clusterPropertyResource.Version, clusterPropertyResource.Resource, name).DoRaw(ctx)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			return "", nil
		case err != nil:
			return "", fmt.Errorf("read ClusterProperty %s: %w", name, err)
		}
		var p clusterProperty
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("read ClusterProperty %s: %w", name, err)
		}
		return p.Spec.Value, nil
	}
	var c claims
	var err error
	if c.id, err = read(clusterIDProperty); err != nil {
		return claims{}, err
	}
	if c.clusterset, err = read(clustersetProperty); err != nil {
		return claims{}, err
	}
	return c, nil
}
