package imports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestOwnWritesRecognisesOnlyTheLastWrite(t *testing.T) {
	w := newOwnWrites()
	meta := func(rv string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv}
	}
	w.wrote(&mcsv1beta1.ServiceImport{ObjectMeta: meta("5")})
	if !w.isEcho(&mcsv1beta1.ServiceImport{ObjectMeta: meta("5")}) {
		t.Error("the written version is not an echo")
	}
	if w.isEcho(&mcsv1beta1.ServiceImport{ObjectMeta: meta("6")}) {
		t.Error("a later version (someone else's write) is an echo")
	}
	if w.isEcho(&corev1.Service{ObjectMeta: meta("5")}) {
		t.Error("a Service of the same name and version is an echo of the ServiceImport's write")
	}
	w.forget(&mcsv1beta1.ServiceImport{ObjectMeta: meta("")})
	if w.isEcho(&mcsv1beta1.ServiceImport{ObjectMeta: meta("5")}) {
		t.Error("forgotten, still an echo")
	}
}
