package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestBrokenConversionWebhookIsNotSilent (issue 55): east's ServiceExports
// are stored in v1alpha1 and read in v1beta1; then their CRD converts
// through a webhook that cannot be reached. Every read of an export
// stored in v1alpha1 now fails: east must not stay "engaged" while its
// exports stop, though nothing of east's changes and mcs-syncer writes
// nothing there; within the documented minute (and the reflector's
// backoff) it is failed, the cause naming the webhook's error; and once
// the webhook is gone, an export made meanwhile is imported.
func TestBrokenConversionWebhookIsNotSilent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "conversion-webhook"
	bed.Namespace(ctx, t, ns)
	eastBed := bed.Cluster("east")
	if err := eastBed.ServeMCSVersions(ctx, "v1alpha1", "v1alpha1", "v1beta1"); err != nil {
		t.Fatal(err)
	}
	crdClient, err := eastBed.Client()
	if err != nil {
		t.Fatal(err)
	}
	setConversion := func(ctx context.Context, conv *apiextensionsv1.CustomResourceConversion) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := crdClient.Get(ctx, client.ObjectKey{Name: "serviceexports." + mcsv1alpha1.GroupName}, crd); err != nil {
				return err
			}
			crd.Spec.Conversion = conv
			return crdClient.Update(ctx, crd)
		})
	}
	t.Cleanup(func() {
		if err := setConversion(context.Background(), &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}); err != nil {
			t.Errorf("restore east's conversion: %v", err)
		}
		if err := eastBed.ServeMCSVersions(context.Background(), "v1beta1", "v1alpha1", "v1beta1"); err != nil {
			t.Errorf("restore east's CRDs: %v", err)
		}
	})
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	if err := manualExportOf(ctx, east, &mcsv1alpha1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns}}, "10.103.1.1"); err != nil {
		t.Fatal(err)
	}
	s := ownSyncer(ctx, t, bed.ConfigPath)
	eventually(ctx, t, "north to import east's old", importedEndpoints(ctx, north, ns, "old", "east", 1))

	broken := time.Now()
	if err := setConversion(ctx, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")}}}); err != nil {
		t.Fatal(err)
	}
	// Nothing of east's changes, and mcs-syncer writes nothing there: its
	// cache of ServiceExports, rebuilt on the CRD's update, cannot be (the
	// API server answers its watches 429 "storage is (re)initializing:
	// conversion webhook … failed"), and nothing else fails. It stayed
	// engaged (a red CI at 72c88c4, where the export below happened to be
	// read through the old storage).
	eventually(ctx, t, "east's API server to convert through the webhook", func() error {
		err := east.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &mcsv1beta1.ServiceExport{})
		if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
			return fmt.Errorf("reading old in v1beta1: %v, want the conversion webhook's error", err)
		}
		return nil
	})
	eventually(ctx, t, "east failed, naming the webhook", readyzSays(ctx, s, "[+]member east ok: failed since", "conversion webhook"))
	t.Logf("east failed %s after its conversion webhook broke", time.Since(broken).Round(time.Second))
	// Written in v1alpha1, as stored: no conversion on the way in.
	if err := manualExportOf(ctx, east, &mcsv1alpha1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "meanwhile", Namespace: ns}}, "10.103.1.2"); err != nil {
		t.Fatal(err)
	}

	if err := setConversion(ctx, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	eventually(ctx, t, "north to import the export made while the webhook was broken", importedEndpoints(ctx, north, ns, "meanwhile", "east", 1))
	eventually(ctx, t, "the export made while the webhook was broken to get its conditions", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "meanwhile", mcsv1beta1.ServiceExportConditionValid)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Valid %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	t.Logf("east's export made meanwhile imported %s after the webhook was removed", time.Since(fixed).Round(time.Second))
}
