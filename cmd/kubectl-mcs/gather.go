package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// runGather runs gather: a support bundle of the clusterset, into out.
func runGather(ctx context.Context, o *options, out string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "kubectl mcs gather:", err)
		return exitUsage
	}
	conns, leftOut, err := o.members(ctx)
	if err != nil {
		return fail(err)
	}
	sayLeftOut(stderr, "gather", leftOut)
	ctx, cancel := context.WithTimeout(ctx, o.timeout+time.Minute)
	defer cancel()
	b := &bundle{files: map[string][]byte{}}
	if o.config != "" {
		// Paths to kubeconfigs, no credentials: kept as it is.
		if raw, err := os.ReadFile(o.config); err == nil {
			b.files["clusterset.yaml"] = raw
		}
	}
	conn, err := o.hub()
	if err != nil {
		return fail(err)
	}
	hub, err := conn.statusHub(o.timeout)
	if err != nil {
		return fail(err)
	}
	if err := b.gather(ctx, conns, conn, status.Input{Syncers: o.statusSyncers(), Hub: hub}, o.timeout); err != nil {
		return fail(err)
	}
	for _, addr := range o.syncers {
		b.syncer(ctx, addr)
	}
	if err := b.write(out); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s: %d files of %d members\n", out, len(b.files), len(conns))
	return exitOK
}

// bundle is the archive's files by path.
type bundle struct{ files map[string][]byte }

// podAccess reads what the API server serves of a Pod: its log, and a
// port's HTTP answer through the pods/proxy subresource.
type podAccess interface {
	logs(ctx context.Context, ns, pod string) ([]byte, error)
	proxy(ctx context.Context, ns, pod, port, path string, params map[string]string) ([]byte, error)
}

type clientsetPods struct{ cs kubernetes.Interface }

// maxLogLines is how much of each mcs-syncer log the bundle keeps: its
// end.
const maxLogLines = 20000

func (p clientsetPods) logs(ctx context.Context, ns, pod string) ([]byte, error) {
	return p.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{TailLines: ptrTo(int64(maxLogLines))}).DoRaw(ctx)
}

func (p clientsetPods) proxy(ctx context.Context, ns, pod, port, path string, params map[string]string) ([]byte, error) {
	return p.cs.CoreV1().Pods(ns).ProxyGet("http", pod, port, path, params).DoRaw(ctx)
}

func ptrTo[T any](v T) *T { return &v }

// gather reads every member into b, then adds the status and diagnose
// reports of the whole clusterset, each member's requests bounded as a
// command's of total (its --timeout).
func (b *bundle) gather(ctx context.Context, conns []memberConn, hub *hubConn, in status.Input, total time.Duration) error {
	var err error
	if in.Members, err = statusMembers(conns, total); err != nil {
		return err
	}
	report := status.Gather(ctx, in)
	b.files["status.txt"] = []byte(report.Text(true))
	checks, err := runChecks(ctx, conns, hub, total)
	if err != nil {
		return err
	}
	b.files["diagnose.txt"] = []byte(checksText(checks))
	for _, m := range conns {
		if m.rest == nil {
			b.files[m.id+"/errors.txt"] = []byte("read through the hub (its publications are in status.txt): give a kubeconfig with a context per member to gather it\n")
			continue
		}
		c, _, err := newMemberClient(m.rest, requestWithin(m.rest, total), requestWithin(m.rest, total))
		if err != nil {
			return fmt.Errorf("member %s: %w", m.id, err)
		}
		cs, err := kubernetes.NewForConfig(m.rest)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.id, err)
		}
		b.member(ctx, m.id, c, clientsetPods{cs})
	}
	return nil
}

// member adds what member id holds: its ServiceExports, ServiceImports,
// imported EndpointSlices, the events about them, and, for each
// mcs-syncer Pod, its log, /metrics and /readyz?verbose. What cannot be
// read is said in id/errors.txt.
func (b *bundle) member(ctx context.Context, id string, c client.Client, pods podAccess) {
	var errs bytes.Buffer
	note := func(what string, err error) { fmt.Fprintf(&errs, "%s: %v\n", what, err) }
	for name, list := range map[string]client.ObjectList{
		"serviceexports.yaml": &mcsv1beta1.ServiceExportList{},
		"serviceimports.yaml": &mcsv1beta1.ServiceImportList{},
	} {
		if err := c.List(ctx, list); err != nil {
			note(name, err)
			continue
		}
		b.add(id+"/"+name, c, list, note)
	}
	var imported discoveryv1.EndpointSliceList
	if err := c.List(ctx, &imported, client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
		note("endpointslices-imported.yaml", err)
	} else {
		b.add(id+"/endpointslices-imported.yaml", c, &imported, note)
	}
	var events corev1.EventList
	for _, kind := range []string{"ServiceExport", "ServiceImport"} {
		var some corev1.EventList
		if err := c.List(ctx, &some, client.MatchingFields{"involvedObject.kind": kind}); err != nil {
			note("events.yaml", err)
			continue
		}
		events.Items = append(events.Items, some.Items...)
	}
	b.add(id+"/events.yaml", c, &events, note)
	var syncers corev1.PodList
	if err := c.List(ctx, &syncers, syncerPods); err != nil {
		note("mcs-syncer Pods", err)
	}
	for _, pod := range syncers.Items {
		prefix := id + "/mcs-syncer/" + pod.Namespace + "_" + pod.Name
		if raw, err := pods.logs(ctx, pod.Namespace, pod.Name); err != nil {
			note(prefix+".log", err)
		} else {
			b.files[prefix+".log"] = raw
		}
		for _, get := range []struct{ file, port, path string }{
			{".metrics", portOf(&pod, "metrics", 8080), "/metrics"},
			{".readyz", portOf(&pod, "probes", 8081), "/readyz"},
			{".members.json", portOf(&pod, "probes", 8081), "/members"},
		} {
			params := map[string]string{}
			if get.path == "/readyz" {
				params["verbose"] = "true"
			}
			if raw, err := pods.proxy(ctx, pod.Namespace, pod.Name, get.port, get.path, params); err != nil {
				note(prefix+get.file, err)
			} else {
				b.files[prefix+get.file] = raw
			}
		}
	}
	if errs.Len() > 0 {
		b.files[id+"/errors.txt"] = errs.Bytes()
	}
}

// syncer adds what the mcs-syncer whose probes answer at addr (--syncer)
// says: /members and /readyz?verbose, under syncers/<addr>/ (its metrics
// are served on another port, which the probes do not name). What cannot
// be read is said in syncers/<addr>/errors.txt.
func (b *bundle) syncer(ctx context.Context, addr string) {
	dir := "syncers/" + strings.NewReplacer("://", "_", "/", "_", ":", "_").Replace(addr) + "/"
	var errs bytes.Buffer
	for _, get := range []struct{ file, path string }{{"members.json", "/members"}, {"readyz", "/readyz?verbose"}} {
		raw, _, err := probeGet(ctx, addr, get.path)
		if err != nil {
			fmt.Fprintf(&errs, "%s: %v\n", get.file, err)
			continue
		}
		// An answer that is not 200 OK is kept too: /readyz's 503 says why.
		b.files[dir+get.file] = raw
	}
	if errs.Len() > 0 {
		b.files[dir+"errors.txt"] = errs.Bytes()
	}
}

// portOf returns the number of pod's container port name, or def.
func portOf(pod *corev1.Pod, name string, def int32) string {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return strconv.Itoa(int(p.ContainerPort))
			}
		}
	}
	return strconv.Itoa(int(def))
}

// add adds list as YAML, with its kind (a typed list's is empty).
func (b *bundle) add(path string, c client.Client, list client.ObjectList, note func(string, error)) {
	if gvk, err := apiutil.GVKForObject(list, c.Scheme()); err == nil {
		list.GetObjectKind().SetGroupVersionKind(gvk)
	}
	raw, err := yaml.Marshal(list.(runtime.Object))
	if err != nil {
		note(path, err)
		return
	}
	b.files[path] = raw
}

// write writes the bundle as a gzipped tar, its files in order.
func (b *bundle) write(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	now := time.Now()
	for _, name := range slices.Sorted(maps.Keys(b.files)) {
		raw := b.files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(raw)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(raw); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
