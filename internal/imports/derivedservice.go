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
// (and removes it from a Headless one).
func (c *Controller) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged) (derived, error) {
	name := types.NamespacedName{Namespace: si.Namespace, Name: DerivedServiceName(client.ObjectKeyFromObject(si))}
	svc, foreign, err := c.currentService(ctx, name, si)
	if err != nil || foreign {
		if foreign {
			msg := fmt.Sprintf("Service %s, the name of this import's derived Service, is not mcs-syncer's; delete or rename it to get a clusterset IP", name)
			cond := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionFalse, ReasonDerivedServiceNotOwned, msg)
			return derived{problem: &cond, recheck: foreignServiceRecheck}, nil
		}
		return derived{}, err
	}
	if merged.Spec.Type != mcsv1beta1.ClusterSetIP {
		if svc != nil {
			if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
				return derived{}, fmt.Errorf("delete derived Service %s: %w", name, err)
			}
		}
		return derived{}, nil
	}

	want, write := planDerivedService(name, si, merged, svc, c.opts.ManagedBy)
	switch {
	case svc == nil:
		err = c.client.Create(ctx, want)
	case write:
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
	c.own.wrote(want)
	return derived{ips: want.Spec.ClusterIPs}, nil
}

// currentService returns the derived Service of si as it is (nil if
// there is none), or foreign when a Service of that name is not
// mcs-syncer's. One left by an earlier ServiceImport of the same name (deleted
// and created again) is deleted now rather than left to the garbage
// collector.
func (c *Controller) currentService(ctx context.Context, name types.NamespacedName, si *mcsv1beta1.ServiceImport) (svc *corev1.Service, foreign bool, err error) {
	svc = &corev1.Service{}
	if err := c.client.Get(ctx, name, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get derived Service %s: %w", name, err)
	}
	if metav1.IsControlledBy(svc, si) {
		return svc, false, nil
	}
	if !c.leftByEarlierImport(svc, si) {
		return nil, true, nil
	}
	if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
		return nil, false, fmt.Errorf("delete derived Service %s of a deleted ServiceImport: %w", name, err)
	}
	return nil, false, nil
}

// leftByEarlierImport reports whether a derived Service is mcs-syncer's,
// controlled by an earlier ServiceImport of the same name (one that was
// deleted and created again).
func (c *Controller) leftByEarlierImport(svc *corev1.Service, si *mcsv1beta1.ServiceImport) bool {
	ref := metav1.GetControllerOfNoCopy(svc)
	return svc.Labels[ManagedByLabel] == c.opts.ManagedBy && ref != nil &&
		ref.Kind == serviceImportGVK.Kind && ref.APIVersion == serviceImportGVK.GroupVersion().String() &&
		ref.Name == si.Name && ref.UID != si.UID
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
