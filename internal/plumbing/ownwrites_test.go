package plumbing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func objectMeta(rv string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv}
}

func TestOwnWritesRecognisesOnlyTheLastWrite(t *testing.T) {
	w := NewOwnWrites()
	w.Wrote("4", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5")})
	if !w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5")}) {
		t.Error("the written version is not an echo")
	}
	if w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("6")}) {
		t.Error("a later version (someone else's write) is an echo")
	}
	if w.IsEcho(&corev1.Service{ObjectMeta: objectMeta("5")}) {
		t.Error("a Service of the same name and version is an echo of the ServiceImport's write")
	}
	w.Forget(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("")})
	if w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5")}) {
		t.Error("forgotten, still an echo")
	}
}

// TestLatestReadsACacheBehindAsTheWrite: the version a write replaced is
// read as the write until the cache shows any other version; a create is
// not followed.
func TestLatestReadsACacheBehindAsTheWrite(t *testing.T) {
	w := NewOwnWrites()
	written := &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5"), Spec: mcsv1beta1.ServiceImportSpec{IPs: []string{"10.0.0.1"}}}
	w.Wrote("4", written)

	got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("4")})
	if got.ResourceVersion != "5" || len(got.Spec.IPs) != 1 {
		t.Fatalf("the replaced version read as %+v, want the write", got)
	}
	if got == written {
		t.Error("Latest returned the recorded object itself, not a copy: the caller may modify it")
	}
	if got := Latest(w, &corev1.Service{ObjectMeta: objectMeta("4")}); got.ResourceVersion != "4" {
		t.Errorf("a Service of the same name read as the ServiceImport's write: %+v", got)
	}
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("7")}); got.ResourceVersion != "7" {
		t.Errorf("a newer version read as %s", got.ResourceVersion)
	}
	// The cache moved on: even the replaced version (it cannot come back)
	// is no longer replaced by the write, which is let go.
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("4")}); got.ResourceVersion != "4" {
		t.Errorf("after the cache caught up, the replaced version read as %s", got.ResourceVersion)
	}

	w.Wrote("5", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("6")})
	w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5")}) // a late event of the replaced version
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("5")}); got.ResourceVersion != "6" {
		t.Errorf("a late event of the replaced version let the write go: read as %s", got.ResourceVersion)
	}

	w.Wrote("", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("9")})
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("3")}); got.ResourceVersion != "3" {
		t.Errorf("a create followed: read as %s", got.ResourceVersion)
	}
}

// TestLatestFollowsAChainOfOwnWrites: a new import's ServiceImport is
// created, then written twice more, each over the last, before the cache
// holds any of them: any version of the chain reads as the last write,
// until the cache shows the last (or any later) version.
func TestLatestFollowsAChainOfOwnWrites(t *testing.T) {
	w := NewOwnWrites()
	w.Wrote("", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("10")})
	w.Wrote("10", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("11")})
	w.Wrote("11", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("12")})
	for _, cached := range []string{"10", "11"} {
		if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta(cached)}); got.ResourceVersion != "12" {
			t.Errorf("cached %s, behind the chain: read as %s, want 12", cached, got.ResourceVersion)
		}
	}
	if w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("10")}) {
		t.Error("the create's late event is taken as the echo of the last write")
	}
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("10")}); got.ResourceVersion != "12" {
		t.Errorf("after the create's late event, cached 10 read as %s, want 12", got.ResourceVersion)
	}
	if !w.IsEcho(&mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("12")}) {
		t.Error("the last write's event is not its echo")
	}
	// Someone else's version, then ours over it: only it is behind.
	w.Wrote("20", &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("21")})
	if got := Latest(w, &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta("12")}); got.ResourceVersion != "12" {
		t.Errorf("a version before someone else's read as %s", got.ResourceVersion)
	}
}
