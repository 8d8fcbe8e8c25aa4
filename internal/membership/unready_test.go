package membership

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestUnreadyStorageIsReported: the API server's 429 "storage is
// (re)initializing" to a watch (what a CRD whose conversion webhook fails
// answers, for as long as it fails) reaches the member's failure
// reporter with its cause, and the client still reads the answer as it
// came; another 429 (APF's) and a success do not.
func TestUnreadyStorageIsReported(t *testing.T) {
	const cause = "storage is (re)initializing: conversion webhook for multicluster.x-k8s.io/v1alpha1, Kind=ServiceExport failed: connection refused"
	answers := map[string]string{
		"/api/v1/namespaces/unready/services": cause,
		"/api/v1/namespaces/apf/services":     "Too many requests, please try again later.",
		// Longer than what is read to find the text: the client reads it whole.
		"/api/v1/namespaces/long/services": "Too many requests: " + strings.Repeat("x", 2*maxUnreadyBody) + " end",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, ok := answers[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":"TooManyRequests","code":429}`, msg)
	}))
	defer srv.Close()

	var mu sync.Mutex
	var reported []error
	rc := reportingUnreadyStorage(&rest.Config{Host: srv.URL}, func(ctx context.Context, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	_, err = cs.CoreV1().Services("unready").Watch(ctx, metav1.ListOptions{ResourceVersion: "7"})
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "conversion webhook") {
		t.Errorf("the client's error: %v, want the 429 as the API server wrote it", err)
	}
	if _, err := cs.CoreV1().Services("apf").List(ctx, metav1.ListOptions{}); !apierrors.IsTooManyRequests(err) {
		t.Errorf("APF's 429 to the client: %v", err)
	}
	if _, err := cs.CoreV1().Services("long").List(ctx, metav1.ListOptions{}); !apierrors.IsTooManyRequests(err) || !strings.HasSuffix(err.Error(), " end") {
		t.Errorf("a long 429 to the client: %.80q…, want it read whole", err)
	}
	if _, err := cs.CoreV1().Services("fine").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a list answered: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 {
		t.Fatalf("reported %d failures (%v), want the one of storage that cannot be built", len(reported), reported)
	}
	if !apierrors.IsTooManyRequests(reported[0]) || reported[0].Error() != cause {
		t.Errorf("reported %v, want the API server's Status %q", reported[0], cause)
	}
}
