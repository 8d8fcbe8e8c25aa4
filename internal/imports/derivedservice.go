package imports

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// foreignServiceRecheck is how often an import whose derived Service name
// is taken by someone else's Service looks again: that Service has no
// owner reference to map its deletion to the import.
const foreignServiceRecheck = 30 * time.Second

// ReasonEndpointSlicesNotWritten is the Ready=False reason of a
// ServiceImport whose EndpointSlices could not be written (the consumer's
// credentials may not write them, a quota, a webhook): its message carries
// the API server's answer.
const ReasonEndpointSlicesNotWritten mcsv1beta1.ServiceImportConditionReason = "EndpointSlicesNotWritten"

// ReasonDerivedServiceNotOwned is the Ready=False reason of a ServiceImport
// whose derived Service name is taken by a Service mcs-syncer does not own.
const ReasonDerivedServiceNotOwned mcsv1beta1.ServiceImportConditionReason = "DerivedServiceNotOwned"

// derived is the outcome of applyDerivedService.
type derived struct {
	// ips are the clusterset IPs (the derived Service's ClusterIPs).
	ips []string
	// problem, if not nil, is the Ready=False condition that keeps the
	// import from its clusterset IP.
	problem *metav1.Condition
	recheck time.Duration
}

// applyDerivedService keeps the derived Service of a ClusterSetIP import
// (and removes it from a Headless one); svc is the Service of its name as
// read (readDerivedService), whoever's.
func (c *Controller) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, svc *corev1.Service) (derived, error) {
	name := types.NamespacedName{Namespace: si.Namespace, Name: DerivedServiceName(client.ObjectKeyFromObject(si))}
	switch derivedStateOf(svc, si, c.opts.ManagedBy) {
	case derivedForeign:
		msg := fmt.Sprintf("Service %s, the name of this import's derived Service, is not mcs-syncer's; delete or rename it to get a clusterset IP", name)
		cond := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionFalse, ReasonDerivedServiceNotOwned, msg)
		return derived{problem: &cond, recheck: foreignServiceRecheck}, nil
	case derivedLeftBehind:
		// Deleted now rather than left to the garbage collector.
		if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			return derived{}, fmt.Errorf("delete derived Service %s of a deleted ServiceImport: %w", name, err)
		}
		svc = nil
	}
	if merged.Spec.Type != mcsv1beta1.ClusterSetIP {
		if svc != nil {
			if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
				return derived{}, fmt.Errorf("delete derived Service %s: %w", name, err)
			}
		}
		return derived{}, nil
	}
	want, write := planDerivedService(name, si, c.siGVK, merged, svc, c.opts.ManagedBy)
	var err error
	replaced := ""
	switch {
	case svc == nil:
		err = c.client.Create(ctx, want)
	case write:
		replaced = svc.ResourceVersion
		err = c.client.Update(ctx, want)
	default:
		return derived{ips: svc.Spec.ClusterIPs}, nil
	}
	if ipFamilyRefused(err) {
		// The consumer cannot serve the exporters' IP families (IPv6 on an
		// IPv4-only cluster, dual-stack on a single-stack one): the
		// standard's IPFamilyNotSupported, until the exports change.
		cond := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionFalse,
			mcsv1beta1.ServiceImportReasonIPFamilyNotSupported, fmt.Sprintf("the derived Service was refused: %v", err))
		return derived{problem: &cond}, nil
	}
	if err != nil {
		return derived{}, fmt.Errorf("write derived Service %s: %w", name, err)
	}
	c.own.Wrote(replaced, want)
	return derived{ips: want.Spec.ClusterIPs}, nil
}

// readDerivedService returns the Service named as key's derived Service,
// whoever's (nil if there is none).
func (c *Controller) readDerivedService(ctx context.Context, key types.NamespacedName) (*corev1.Service, error) {
	name := types.NamespacedName{Namespace: key.Namespace, Name: DerivedServiceName(key)}
	svc := &corev1.Service{}
	if err := c.client.Get(ctx, name, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get derived Service %s: %w", name, err)
	}
	return plumbing.Latest(c.own, svc), nil
}

// derivedState says whose the Service of an import's derived Service name
// is.
type derivedState int

const (
	derivedNone       derivedState = iota // there is none
	derivedOurs                           // the import's own
	derivedLeftBehind                     // mcs-syncer's, of an earlier ServiceImport of the same name (deleted and created again)
	derivedForeign                        // not mcs-syncer's
)

// derivedStateOf says whose svc is, for ServiceImport si.
func derivedStateOf(svc *corev1.Service, si *mcsv1beta1.ServiceImport, managedBy string) derivedState {
	if svc == nil {
		return derivedNone
	}
	if metav1.IsControlledBy(svc, si) {
		return derivedOurs
	}
	ref := metav1.GetControllerOfNoCopy(svc)
	// Of any version: one written before the consumer's CRD was upgraded
	// or rolled back is still one of ours.
	if svc.Labels[ManagedByLabel] == managedBy && mcsapi.IsServiceImport(ref) && ref.Name == si.Name && ref.UID != si.UID {
		return derivedLeftBehind
	}
	return derivedForeign
}

// ipFamilyRefused reports whether the API server refused a Service for
// its IP families or family policy.
func ipFamilyRefused(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if strings.HasPrefix(cause.Field, "spec.ipFamil") {
			return true
		}
	}
	return false
}
