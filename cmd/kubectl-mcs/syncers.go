package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// syncerPods selects mcs-syncer's Pods, as config/ deploys them.
var syncerPods = client.MatchingLabels{"app.kubernetes.io/name": "mcs-syncer"}

// podSyncers returns what finds the mcs-syncers that run as Pods in
// member id: each running Pod, whose /members is read through the API
// server (pods/proxy to its probes port).
func podSyncers(id string, c client.Reader, pods podAccess) func(context.Context) ([]status.Syncer, error) {
	return func(ctx context.Context) ([]status.Syncer, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, syncerPods); err != nil {
			return nil, err
		}
		var syncers []status.Syncer
		for _, pod := range list.Items {
			if pod.Status.Phase != corev1.PodRunning {
				continue
			}
			port := portOf(&pod, "probes", 8081)
			syncers = append(syncers, status.Syncer{
				Name: id + ": " + pod.Namespace + "/" + pod.Name,
				Read: func(ctx context.Context) (membership.View, error) {
					raw, err := pods.proxy(ctx, pod.Namespace, pod.Name, port, "/members", nil)
					if err != nil {
						return membership.View{}, err
					}
					return decodeView(raw)
				},
			})
		}
		return syncers, nil
	}
}

// addrSyncer reads the mcs-syncer whose probes answer at addr
// (--syncer: one that runs outside the members, or is reached directly).
func addrSyncer(addr string) status.Syncer {
	return status.Syncer{Name: addr, Read: func(ctx context.Context) (membership.View, error) {
		raw, ok, err := probeGet(ctx, addr, "/members")
		if err != nil {
			return membership.View{}, err
		}
		if !ok {
			return membership.View{}, fmt.Errorf("%s", firstLine(raw))
		}
		return decodeView(raw)
	}}
}

// probeGet reads path (with its query) from the probe port at addr
// (host:port or a URL): the body, at most maxViewBytes of it, and whether
// the answer was 200 OK (if not, the body begins with the status).
func probeGet(ctx context.Context, addr, path string) (body []byte, ok bool, err error) {
	url := strings.TrimSuffix(addr, "/")
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := (&http.Client{Timeout: requestTimeout}).Do(req)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxViewBytes))
	if err != nil {
		return nil, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return append([]byte(resp.Status+": "), raw...), false, nil
	}
	return raw, true, nil
}

// maxViewBytes bounds a /members answer read: 1,000 members take ~300 KB.
const maxViewBytes = 16 << 20

// decodeView reads a /members answer.
func decodeView(raw []byte) (membership.View, error) {
	var v membership.View
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("/members is not an mcs-syncer's view (an mcs-syncer older than kubectl-mcs serves none): %w", err)
	}
	return v, nil
}

func firstLine(raw []byte) string {
	line, _, _ := strings.Cut(string(raw), "\n")
	return line
}
