package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcs-syncer/mcs-syncer/hack/image/ociimage"
)

// The images' names, as pods and containerd's sandbox_image refer to them.
const (
	Pause  = "mcs.test/pause:1"
	Server = "mcs.test/netserver:1"
	Client = "mcs.test/netclient:1"
)

// Archives maps each image to the file name of its archive in the folder
// that Build writes.
var Archives = map[string]string{
	Pause:  "pause.tar",
	Server: "netserver.tar",
	Client: "netclient.tar",
}

// Build compiles the programs of this folder (found under srcDir, the
// repository root) and writes every image's archive into outDir. busybox is
// the path of a statically linked busybox (Debian's busybox-static), the
// client image's shell and tools.
func Build(srcDir, outDir, busybox string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	programs := map[string][]byte{}
	for _, name := range []string{"pause", "netserver", "probe"} {
		data, err := ociimage.GoBinary(srcDir, "./test/images/"+name)
		if err != nil {
			return err
		}
		programs[name] = data
	}
	bb, err := busyboxFiles(busybox)
	if err != nil {
		return err
	}
	pause := ociimage.File{Path: "pause", Mode: 0o755, Data: programs["pause"]}
	env := []string{"PATH=/bin:/"}
	imgs := []ociimage.Image{
		{Name: Pause, Entrypoint: []string{"/pause"}, Env: env, Files: []ociimage.File{pause}},
		{Name: Server, Entrypoint: []string{"/netserver"}, Env: env,
			Files: []ociimage.File{{Path: "netserver", Mode: 0o755, Data: programs["netserver"]}}},
		{Name: Client, Entrypoint: []string{"/pause"}, Env: env,
			Files: append(bb, pause, ociimage.File{Path: "probe", Mode: 0o755, Data: programs["probe"]})},
	}
	for _, img := range imgs {
		if _, err := ociimage.WriteArchive(filepath.Join(outDir, Archives[img.Name]), img); err != nil {
			return err
		}
	}
	return nil
}

// busyboxFiles returns /bin/busybox and a link for each of its applets,
// plus the few files a shell in a pod expects.
func busyboxFiles(busybox string) ([]ociimage.File, error) {
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("images: the client image needs a static busybox (Debian: apt-get install busybox-static): %w", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("images: %s --list: %w", busybox, err)
	}
	files := []ociimage.File{
		{Path: "bin/busybox", Mode: 0o755, Data: data},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		{Path: "tmp/.keep", Mode: 0o644},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" && !strings.Contains(applet, "/") {
			files = append(files, ociimage.File{Path: "bin/" + applet, Link: "busybox"})
		}
	}
	return files, nil
}
