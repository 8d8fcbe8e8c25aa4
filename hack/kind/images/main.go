// Command images writes the images that kubeadm runs on an mcs-kind node
// (the control plane, etcd, CoreDNS, pause) as archives, from the
// binaries that `make tools` built from Go modules: no registry is
// needed, and CoreDNS is the project's build, whose kubernetes plugin
// answers clusterset.local with its multicluster option. The names are
// those that the node's kubeadm asks for (`kubeadm config images list`).
// kube-proxy needs iptables from Debian, so hack/kind/images.sh builds
// its image from the node's root filesystem instead.
//
//	go run ./hack/kind/images -bin .cache/bin -out DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/mcs-syncer/mcs-syncer/hack/image/ociimage"
)

func main() {
	bin := flag.String("bin", ".cache/bin", "the folder of kubeadm and the components' binaries")
	out := flag.String("out", "", "the folder to write <component>.tar into")
	kubernetes := flag.String("kubernetes-version", "v1.36.3", "the Kubernetes version kubeadm deploys")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "images: -out is required")
		os.Exit(2)
	}
	if err := run(*bin, *out, *kubernetes); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(bin, out, kubernetes string) error {
	listed, err := exec.Command(filepath.Join(bin, "kubeadm"), "config", "images", "list",
		"--kubernetes-version", kubernetes).Output()
	if err != nil {
		return fmt.Errorf("kubeadm config images list: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	pause, err := ociimage.GoBinary(".", "./test/images/pause")
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(listed)) {
		component := strings.SplitN(path.Base(name), ":", 2)[0]
		img, err := image(bin, component, name, pause)
		if err != nil {
			return err
		}
		if img == nil {
			continue
		}
		digest, err := ociimage.WriteArchive(filepath.Join(out, component+".tar"), *img)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", name, digest)
	}
	return nil
}

// image is the image kubeadm calls name, or nil for kube-proxy (built
// elsewhere). The binaries go where kubeadm's manifests call them: by name
// on the PATH, CoreDNS and pause as their images' entrypoints.
func image(bin, component, name string, pause []byte) (*ociimage.Image, error) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	binary := func(file, at string, extra ...ociimage.File) (*ociimage.Image, error) {
		data, err := os.ReadFile(filepath.Join(bin, file))
		if err != nil {
			return nil, fmt.Errorf("%s: %w (make tools builds it)", name, err)
		}
		files := append([]ociimage.File{{Path: at, Mode: 0o755, Data: data}}, extra...)
		return &ociimage.Image{Name: name, Env: env, Files: files}, nil
	}
	switch component {
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		return binary(component, "usr/local/bin/"+component)
	case "etcd":
		return binary("etcd", "usr/local/bin/etcd", ociimage.File{Path: "tmp/.keep", Mode: 0o644})
	case "coredns":
		img, err := binary("coredns", "coredns")
		if img != nil {
			img.Entrypoint = []string{"/coredns"}
		}
		return img, err
	case "pause":
		return &ociimage.Image{Name: name, Env: env, Entrypoint: []string{"/pause"},
			Files: []ociimage.File{{Path: "pause", Mode: 0o755, Data: pause}}}, nil
	case "kube-proxy":
		return nil, nil
	}
	return nil, fmt.Errorf("kubeadm lists %s, which this program does not know how to build", name)
}
