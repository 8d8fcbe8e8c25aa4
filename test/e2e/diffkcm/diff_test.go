package diffkcm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The managed-by values of the two pairs compared: the example and
// kube-controller-manager's controller of the same job.
const (
	ours          = "endpointslice.example.com"
	kcm           = "endpointslice-controller.k8s.io"
	oursMirroring = "mirroring.example.com"
	kcmMirroring  = "endpointslicemirroring-controller.k8s.io"
)

// pairs are compared after each step.
var pairs = [][2]string{{ours, kcm}, {oursMirroring, kcmMirroring}}

// TestEndpointSliceControllerMatchesKCM runs the seeded random workload
// and, after every step, compares each Service's slices of the example
// controller with kube-controller-manager's.
func TestEndpointSliceControllerMatchesKCM(t *testing.T) {
	needTestbed(t)
	steps, seed := envInt(t, "DIFFKCM_STEPS", 150), uint64(envInt(t, "DIFFKCM_SEED", int(time.Now().UnixNano()%1e9)))
	zoneMinimums := envInt(t, "DIFFKCM_ZONE_MINIMUMS", 0) == 1
	t.Logf("seed %d, %d steps, zone minimums %v; replay with DIFFKCM_SEED=%d DIFFKCM_STEPS=%d", seed, steps, zoneMinimums, seed, steps)
	// The reason of a failure is said again after the controllers' logs
	// (printed by later cleanups, which run first), so that the end of
	// the output, all that CI may show, holds it.
	var failure string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED, replay with DIFFKCM_SEED=%d DIFFKCM_STEPS=%d: %s", seed, steps, failure)
		}
	})
	fatalf := func(format string, args ...any) {
		failure = fmt.Sprintf(format, args...)
		t.Fatal(failure)
	}
	cluster := bed.Clusters[0]
	kube, err := cluster.Kubernetes()
	if err != nil {
		fatalf("%v", err)
	}
	ctx := t.Context()
	pids, err := cluster.Pids()
	if err != nil {
		fatalf("%v", err)
	}
	pids = map[string]int{
		"kube-controller-manager (all its controllers)": pids["kube-controller-manager"],
		"examples/endpointslice":                        startOurs(t, "endpointslice", cluster.KubeconfigPath, ours, fmt.Sprintf("--zone-minimums=%v", zoneMinimums)),
		"examples/mirroring":                            startOurs(t, "mirroring", cluster.KubeconfigPath, oursMirroring),
	}
	sbs := &sideBySide{}
	if err := sbs.watchSlices(ctx, kube); err != nil {
		fatalf("%v", err)
	}

	w := &workload{kube: kube, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodes: cluster.Nodes}
	if err := w.setUp(ctx); err != nil {
		fatalf("%v", err)
	}
	if err := sbs.startCPU(pids); err != nil {
		fatalf("%v", err)
	}
	explained := map[string]int{}
	compared := 0 // endpoints compared, summed over the steps
	barrierReady := false
	for i := 1; i <= steps; i++ {
		what, err := w.step(ctx)
		if apierrors.IsConflict(err) {
			i-- // kwok wrote the pod in between: draw another step
			continue
		}
		if err != nil {
			fatalf("seed %d step %d (%s): %v", seed, i, what, err)
		}
		barrierReady = !barrierReady
		n, err := settle(ctx, kube, barrierReady, zoneMinimums, what, explained, sbs, filepath.Join(cluster.LogDir(), "kube-controller-manager.log"))
		if err != nil {
			fatalf("seed %d step %d (%s): %v\n%s", seed, i, what, err, describePods(ctx, kube, err.Error()))
		}
		compared += n
		if i%50 == 0 {
			t.Logf("step %d of %d: no unexplained difference; explained so far %v", i, steps, explained)
		}
	}
	if steps > 0 && compared/steps < 10 {
		fatalf("only %d endpoints compared in %d steps: the workload does not exercise the controllers", compared, steps)
	}
	t.Logf("%d steps, %d endpoints compared, 0 unexplained differences; explained: %v", steps, compared, explained)
	sbs.report(t, cluster.AuditLogPath, steps)
}

// startOurs runs an example controller, with flags besides its
// kubeconfig and managed-by, beside kube-controller-manager until the test
// ends; its log is printed if the test fails.
func startOurs(t *testing.T, example, kubeconfig, managedBy string, flags ...string) (pid int) {
	logPath := filepath.Join(t.TempDir(), example+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(examples[example], append([]string{"--kubeconfig", kubeconfig, "--managed-by", managedBy}, flags...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s's log (last 4 KB):\n%s", example, tail(b, 4096))
		}
	})
	return cmd.Process.Pid
}

// settle flips the barrier pod's readiness, waits until both controllers
// show it (both have then seen the step), then until every Service's
// slices of the two agree (or differ as explained) and hold still for a
// moment. It returns the diff of the first Service that still differs
// after a minute, else the number of endpoints compared. zoneMinimums
// says ours runs WithZoneMinimums.
func settle(ctx context.Context, kube kubernetes.Interface, barrierReady, zoneMinimums bool, what string, explained map[string]int, sbs *sideBySide, kcmLog string) (int, error) {
	sbs.flipping()
	if err := flipBarrier(ctx, kube, barrierReady); err != nil {
		return 0, err
	}
	compared := 0
	var lastDiff, lastRVs string
	var lastExplained []string
	stable := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		byController, rvs, err := listSlices(ctx, kube)
		if err != nil {
			return false, nil
		}
		if !barrierShows(byController[ours][barrier], barrierReady) || !barrierShows(byController[kcm][barrier], barrierReady) {
			lastDiff = "the barrier's readiness has not reached both controllers' slices"
			return false, nil
		}
		svcs, err := kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		lastDiff, lastExplained, compared = "", nil, 0
		for _, s := range svcs.Items {
			for _, pair := range pairs {
				for _, slice := range byController[pair[1]][s.Name] {
					compared += len(slice.Endpoints)
				}
				name, diff := compare(topologyAuto(&s), zoneMinimums, byController[pair[0]][s.Name], byController[pair[1]][s.Name])
				if diff != "" && pair[1] == kcmMirroring && mirroringStuck(kcmLog, namespace+"/"+s.Name) {
					name, diff = explainedMirroringRecycle, ""
				}
				if diff != "" {
					lastDiff = fmt.Sprintf("service %s differs (%s, then %s):\n%s", s.Name, pair[0], pair[1], diff)
					return false, nil
				}
				if name != "" {
					lastExplained = append(lastExplained, name)
				}
			}
		}
		if rvs != lastRVs {
			lastRVs, stable = rvs, 0
			return false, nil
		}
		stable++
		return stable >= 2, nil
	})
	if err != nil {
		return 0, fmt.Errorf("not settled after a minute: %s", lastDiff)
	}
	for _, name := range lastExplained {
		explained[name]++
	}
	sbs.settled(barrierReady, what)
	return compared, nil
}

// describePods prints the pods that a diff names, for the replay.
func describePods(ctx context.Context, kube kubernetes.Interface, diff string) string {
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range pods.Items {
		if !strings.Contains(diff, `"name":"`+p.Name+`"`) {
			continue
		}
		p.ManagedFields = nil
		fmt.Fprintf(&b, "pod %s: labels %v, deleting %v, containers %+v, init containers %+v, status %+v\n",
			p.Name, p.Labels, p.DeletionTimestamp != nil, p.Spec.Containers, p.Spec.InitContainers, p.Status)
	}
	return b.String()
}

func topologyAuto(s *corev1.Service) bool {
	v := s.Annotations[corev1.AnnotationTopologyMode]
	return v == "Auto" || v == "auto"
}

// listSlices returns both controllers' slices by Service name, and a
// fingerprint of all their resourceVersions.
func listSlices(ctx context.Context, kube kubernetes.Interface) (map[string]map[string][]discoveryv1.EndpointSlice, string, error) {
	list, err := kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s in (%s,%s,%s,%s)", discoveryv1.LabelManagedBy, ours, kcm, oursMirroring, kcmMirroring),
	})
	if err != nil {
		return nil, "", err
	}
	by := map[string]map[string][]discoveryv1.EndpointSlice{ours: {}, kcm: {}, oursMirroring: {}, kcmMirroring: {}}
	var rvs []string
	for _, s := range list.Items {
		m := s.Labels[discoveryv1.LabelManagedBy]
		svc := s.Labels[discoveryv1.LabelServiceName]
		by[m][svc] = append(by[m][svc], s)
		rvs = append(rvs, s.Name+"@"+s.ResourceVersion)
	}
	slices.Sort(rvs)
	return by, strings.Join(rvs, ","), nil
}

func barrierShows(slices_ []discoveryv1.EndpointSlice, ready bool) bool {
	for _, s := range slices_ {
		for _, ep := range s.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, false) == ready {
				return true
			}
		}
	}
	return false
}

// flipBarrier waits for kwok to run the barrier pod, then sets its
// readiness.
func flipBarrier(ctx context.Context, kube kubernetes.Interface, ready bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(namespace).Get(ctx, barrier, metav1.GetOptions{})
		if err != nil || p.Status.PodIP == "" {
			return false, nil
		}
		w := &workload{kube: kube}
		if err := w.setReady(ctx, p, ready); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
