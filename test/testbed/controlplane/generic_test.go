package controlplane

import (
	"slices"
	"testing"
)

func TestGenericArgsDropWhatOnlyKubeAPIServerHas(t *testing.T) {
	args := []string{
		"--etcd-servers=http://127.0.0.1:2379", "--secure-port=32766",
		"--service-cluster-ip-range=10.250.0.0/16", "--kubelet-timeout=5s",
		"--authorization-mode=Node,RBAC", "--audit-policy-file=/p.yaml",
	}
	want := []string{
		"--etcd-servers=http://127.0.0.1:2379", "--secure-port=32766",
		"--authorization-mode=RBAC", "--audit-policy-file=/p.yaml",
	}
	if got := genericArgs(args); !slices.Equal(got, want) {
		t.Errorf("genericArgs:\n got %q\nwant %q", got, want)
	}
}
