package workloads

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/test/images"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/realnode"
)

// Workloads of the real nodes: servers that say who answered and a client
// to ask them from inside a cluster.

// ServerPort is a port a Server listens on.
type ServerPort struct {
	Name     string
	Protocol corev1.Protocol // TCP (default) or UDP
	Port     int32
}

// ServerPodSpec returns the spec of a netserver pod on the real node that
// answers on ports with "<cluster> <pod> <pod IP> <protocol>/<port>". With
// keepServing it ignores SIGTERM, so a deleted pod stays terminating and
// serving for its grace period.
func ServerPodSpec(cluster string, keepServing bool, ports ...ServerPort) corev1.PodSpec {
	var args []string
	if keepServing {
		args = append(args, "-keep-serving-on-term")
	}
	var containerPorts []corev1.ContainerPort
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		args = append(args, fmt.Sprintf("%s:%d", strings.ToLower(string(proto)), p.Port))
		containerPorts = append(containerPorts, corev1.ContainerPort{Name: p.Name, Protocol: proto, ContainerPort: p.Port})
	}
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "server", Image: images.Server, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: args, Ports: containerPorts,
			Env: []corev1.EnvVar{
				{Name: "CLUSTER", Value: cluster},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			},
		}},
	}
	realnode.Place(&spec)
	return spec
}

// ServerDeployment returns a Deployment ns/name of replicas netservers (see
// ServerPodSpec) labelled app=<name>.
func ServerDeployment(ns, name, cluster string, replicas int32, ports ...ServerPort) *appsv1.Deployment {
	d := Deployment(ns, name, replicas)
	d.Spec.Template.Spec = ServerPodSpec(cluster, false, ports...)
	return d
}

// ClientPod returns a pod ns/name on the real node whose container idles,
// with a shell, busybox's tools and probe (see test/images) to Exec.
func ClientPod(ns, name string) *corev1.Pod {
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "client", Image: images.Client, ImagePullPolicy: corev1.PullIfNotPresent,
		}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
	realnode.Place(&spec)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
}
