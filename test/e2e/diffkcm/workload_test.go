package diffkcm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

const (
	namespace = "diff"
	// holdFinalizer keeps a deleted pod terminating until the workload
	// lets it go (kwok deletes pods at once otherwise).
	holdFinalizer = "diffkcm.mcs-syncer.io/hold"
	// barrier is the Service and pod whose readiness each step flips last:
	// once both controllers show it, both have seen the step's events.
	barrier = "barrier"
	maxPods = 60
)

// workload makes seeded random changes to the Services and Pods of
// namespace diff.
type workload struct {
	kube  kubernetes.Interface
	rng   *rand.Rand
	nodes []string
	// pods counts the pods ever created, for their names.
	pods int
}

// services are the shapes the controllers must agree on; selectorless
// ones get slices from neither.
func services() []*corev1.Service {
	port := func(name string, number int32, target intstr.IntOrString) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: number, TargetPort: target, Protocol: corev1.ProtocolTCP}
	}
	svc := func(name string, selector map[string]string, mutate func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"shape": name}},
			Spec: corev1.ServiceSpec{Selector: selector,
				Ports: []corev1.ServicePort{port("http", 80, intstr.FromString("http"))}},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	return []*corev1.Service{
		svc("plain", map[string]string{"app": "a"}, nil),
		svc("numbered", map[string]string{"app": "b"}, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{port("", 80, intstr.FromInt32(8080))}
		}),
		svc("headless", map[string]string{"app": "a"}, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
		svc("headless-portless", map[string]string{"app": "b"}, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Ports = corev1.ClusterIPNone, nil
		}),
		svc("not-ready", map[string]string{"app": "b"}, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		svc("dual", map[string]string{"app": "a"}, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}),
		svc("close", map[string]string{"app": "a"}, func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		}),
		svc("topology", map[string]string{"app": "b"}, func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Auto"}
		}),
		svc("multi", map[string]string{"app": "a"}, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, port("metrics", 9090, intstr.FromString("metrics")),
				corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP})
		}),
		svc("manual", nil, nil),
		svc("manual-dual", nil, nil),
		svc(barrier, map[string]string{"app": barrier}, nil),
	}
}

// setUp creates the namespace, the Services and the barrier pod.
func (w *workload) setUp(ctx context.Context) error {
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := testbed.WaitForPodsAllowed(ctx, w.kube, namespace); err != nil {
		return err
	}
	for _, s := range services() {
		if _, err := w.kube.CoreV1().Services(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %s: %w", s.Name, err)
		}
	}
	p := w.newPod(barrier, barrier)
	_, err := w.kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
	return err
}

func (w *workload) newPod(name, app string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": app},
			Finalizers: []string{holdFinalizer}},
		Spec: corev1.PodSpec{
			NodeName: w.nodes[w.rng.IntN(len(w.nodes))],
			Containers: []corev1.Container{{Name: "app", Image: "app",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}},
		},
	}
	if w.rng.IntN(2) == 0 {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
	}
	if w.rng.IntN(4) == 0 {
		// A sidecar serving the named port http in place of the app
		// (the container's port wins).
		p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 15090, Protocol: corev1.ProtocolTCP}}}}
	}
	if w.rng.IntN(3) == 0 {
		p.Spec.Hostname, p.Spec.Subdomain = name, []string{"headless", "plain", "other"}[w.rng.IntN(3)]
	}
	return p
}

// step makes one random change and describes it.
func (w *workload) step(ctx context.Context) (string, error) {
	pods, err := w.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var live, terminating, running []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Name == barrier:
		case p.DeletionTimestamp != nil:
			terminating = append(terminating, p)
		default:
			live = append(live, p)
		}
		if p.Name != barrier && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	roll := w.rng.IntN(100)
	switch {
	case roll < 20 && len(live) < maxPods || len(live) == 0:
		w.pods++
		p := w.newPod(fmt.Sprintf("p%d", w.pods), []string{"a", "b"}[w.rng.IntN(2)])
		_, err := w.kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return fmt.Sprintf("create pod %s app=%s on %s", p.Name, p.Labels["app"], p.Spec.NodeName), err
	case roll < 45 && len(running) > 0:
		p := pick(w.rng, running)
		ready := !podReady(p)
		return fmt.Sprintf("pod %s ready=%v", p.Name, ready), w.setReady(ctx, p, ready)
	case roll < 55:
		p := pick(w.rng, live)
		p.Labels["app"] = map[string]string{"a": "b", "b": "a"}[p.Labels["app"]]
		_, err := w.kube.CoreV1().Pods(namespace).Update(ctx, p, metav1.UpdateOptions{})
		return fmt.Sprintf("pod %s app=%s", p.Name, p.Labels["app"]), err
	case roll < 67 || len(live) >= maxPods:
		p := pick(w.rng, live)
		err := w.kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)})
		return fmt.Sprintf("delete pod %s (terminating)", p.Name), err
	case roll < 75 && len(terminating) > 0:
		p := pick(w.rng, terminating)
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == holdFinalizer })
		_, err := w.kube.CoreV1().Pods(namespace).Update(ctx, p, metav1.UpdateOptions{})
		return fmt.Sprintf("pod %s gone", p.Name), ignoreNotFound(err)
	case roll < 80 && len(running) > 0:
		p := pick(w.rng, running)
		return fmt.Sprintf("pod %s gets an IPv6 address", p.Name), w.addIPv6(ctx, p)
	case roll < 92:
		return w.changeEndpoints(ctx)
	default:
		return w.changeService(ctx)
	}
}

// changeService changes one thing of one Service with a selector.
func (w *workload) changeService(ctx context.Context) (string, error) {
	shapes := services()
	shape := shapes[w.rng.IntN(len(shapes)-3)] // neither the selector-less ones nor the barrier
	s, err := w.kube.CoreV1().Services(namespace).Get(ctx, shape.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var what string
	switch w.rng.IntN(6) {
	case 0:
		s.Spec.Selector["app"] = map[string]string{"a": "b", "b": "a"}[s.Spec.Selector["app"]]
		what = "selector app=" + s.Spec.Selector["app"]
	case 1:
		s.Spec.PublishNotReadyAddresses = !s.Spec.PublishNotReadyAddresses
		what = fmt.Sprintf("publishNotReadyAddresses=%v", s.Spec.PublishNotReadyAddresses)
	case 2:
		if _, ok := s.Labels["tier"]; ok {
			delete(s.Labels, "tier")
			what = "label tier removed"
		} else {
			s.Labels["tier"] = "front"
			what = "label tier=front"
		}
	case 3:
		if len(s.Spec.Ports) > 0 && s.Spec.Ports[len(s.Spec.Ports)-1].Name == "extra" {
			s.Spec.Ports = s.Spec.Ports[:len(s.Spec.Ports)-1]
			what = "port extra removed"
		} else if s.Spec.ClusterIP != corev1.ClusterIPNone || len(s.Spec.Ports) > 0 {
			if len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Name == "" {
				s.Spec.Ports[0].Name = "main"
			}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 8443, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
			what = "port extra -> metrics"
		}
	case 4:
		if s.Spec.TrafficDistribution == nil {
			s.Spec.TrafficDistribution = ptr.To(pick(w.rng, []string{corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}))
		} else {
			s.Spec.TrafficDistribution = nil
		}
		what = fmt.Sprintf("trafficDistribution=%v", ptr.Deref(s.Spec.TrafficDistribution, "none"))
	case 5:
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		if s.Annotations[corev1.AnnotationTopologyMode] == "Auto" {
			delete(s.Annotations, corev1.AnnotationTopologyMode)
		} else {
			s.Annotations[corev1.AnnotationTopologyMode] = "Auto"
		}
		what = "topology-mode=" + s.Annotations[corev1.AnnotationTopologyMode]
	}
	_, err = w.kube.CoreV1().Services(namespace).Update(ctx, s, metav1.UpdateOptions{})
	return fmt.Sprintf("service %s: %s", s.Name, what), err
}

func (w *workload) setReady(ctx context.Context, p *corev1.Pod, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	found := false
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Status.Conditions[i].Status, found = status, true
		}
	}
	if !found {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status})
	}
	_, err := w.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return ignoreNotFound(err)
}

// addIPv6 gives a pod an IPv6 address besides kwok's IPv4 one, made from
// it (fd00:100::<IPv4>), so dual-stack Services have both families.
func (w *workload) addIPv6(ctx context.Context, p *corev1.Pod) error {
	v4, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !v4.Is4() || len(p.Status.PodIPs) > 1 {
		return nil
	}
	b := v4.As4()
	v6 := netip.AddrFrom16([16]byte{0xfd, 0, 1, 0, 10: 0, 11: 0, 12: b[0], 13: b[1], 14: b[2], 15: b[3]})
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}, {IP: v6.String()}}
	_, err = w.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return ignoreNotFound(err)
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func pick[T any](rng *rand.Rand, items []T) T { return items[rng.IntN(len(items))] }

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// changeEndpoints rewrites the Endpoints of a selector-less Service, or
// toggles its skip-mirror label, or gives "manual" a selector or takes it
// away (kube-controller-manager's endpoints controller then owns the
// Endpoints, and neither mirroring controller mirrors them).
func (w *workload) changeEndpoints(ctx context.Context) (string, error) {
	name := pick(w.rng, []string{"manual", "manual-dual"})
	switch w.rng.IntN(10) {
	case 0:
		ep, err := w.kube.CoreV1().Endpoints(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", ignoreNotFound(err)
		}
		if ep.Labels == nil {
			ep.Labels = map[string]string{}
		}
		if ep.Labels["endpointslice.kubernetes.io/skip-mirror"] == "true" {
			delete(ep.Labels, "endpointslice.kubernetes.io/skip-mirror")
		} else {
			ep.Labels["endpointslice.kubernetes.io/skip-mirror"] = "true"
		}
		_, err = w.kube.CoreV1().Endpoints(namespace).Update(ctx, ep, metav1.UpdateOptions{})
		return fmt.Sprintf("endpoints %s skip-mirror=%s", name, ep.Labels["endpointslice.kubernetes.io/skip-mirror"]), err
	case 1:
		s, err := w.kube.CoreV1().Services(namespace).Get(ctx, "manual", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if s.Spec.Selector == nil {
			s.Spec.Selector = map[string]string{"app": "a"}
		} else {
			s.Spec.Selector = nil
		}
		_, err = w.kube.CoreV1().Services(namespace).Update(ctx, s, metav1.UpdateOptions{})
		return fmt.Sprintf("service manual selector=%v", s.Spec.Selector), err
	}
	//lint:ignore SA1019 the mirroring controllers' input is the deprecated Endpoints API
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels: map[string]string{}, Annotations: map[string]string{}}}
	if w.rng.IntN(2) == 0 {
		ep.Labels["tier"] = pick(w.rng, []string{"db", "cache"})
	}
	if w.rng.IntN(2) == 0 {
		ep.Annotations["note"] = pick(w.rng, []string{"one", "two"})
	}
	ports := [][]corev1.EndpointPort{
		{{Name: "sql", Port: 5432, Protocol: corev1.ProtocolTCP}},
		{{Name: "sql", Port: 5432, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
		{{Port: 80, Protocol: corev1.ProtocolTCP}},
		nil,
	}
	for range 1 + w.rng.IntN(3) {
		//lint:ignore SA1019 the mirroring controllers' input is the deprecated Endpoints API
		subset := corev1.EndpointSubset{Ports: pick(w.rng, ports)}
		for range w.rng.IntN(6) {
			i := w.rng.IntN(12)
			a := corev1.EndpointAddress{IP: fmt.Sprintf("10.250.0.%d", i)}
			if name == "manual-dual" && w.rng.IntN(2) == 0 {
				a.IP = fmt.Sprintf("fd00:250::%x", i)
			}
			if w.rng.IntN(3) == 0 {
				a.Hostname = fmt.Sprintf("host-%d", i)
			}
			if w.rng.IntN(3) == 0 {
				a.NodeName = ptr.To(pick(w.rng, w.nodes))
			}
			if w.rng.IntN(3) == 0 {
				subset.NotReadyAddresses = append(subset.NotReadyAddresses, a)
			} else {
				subset.Addresses = append(subset.Addresses, a)
			}
		}
		if len(subset.Addresses)+len(subset.NotReadyAddresses) > 0 {
			ep.Subsets = append(ep.Subsets, subset)
		}
	}
	old, err := w.kube.CoreV1().Endpoints(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = w.kube.CoreV1().Endpoints(namespace).Create(ctx, ep, metav1.CreateOptions{})
	case err == nil:
		ep.ResourceVersion = old.ResourceVersion
		_, err = w.kube.CoreV1().Endpoints(namespace).Update(ctx, ep, metav1.UpdateOptions{})
	}
	return fmt.Sprintf("endpoints %s: %d subsets, labels %v, annotations %v", name, len(ep.Subsets), ep.Labels, ep.Annotations), err
}
