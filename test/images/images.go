package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		bin := filepath.Join(outDir, name+".bin")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin, "./test/images/"+name)
		cmd.Dir = srcDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("images: go build %s: %w\n%s", name, err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		programs[name] = data
		_ = os.Remove(bin)
	}
	bb, err := busyboxFiles(busybox)
	if err != nil {
		return err
	}
	pause := File{Path: "pause", Mode: 0o755, Data: programs["pause"]}
	env := []string{"PATH=/bin:/"}
	imgs := []Image{
		{Name: Pause, Entrypoint: []string{"/pause"}, Env: env, Files: []File{pause}},
		{Name: Server, Entrypoint: []string{"/netserver"}, Env: env,
			Files: []File{{Path: "netserver", Mode: 0o755, Data: programs["netserver"]}}},
		{Name: Client, Entrypoint: []string{"/pause"}, Env: env,
			Files: append(bb, pause, File{Path: "probe", Mode: 0o755, Data: programs["probe"]})},
	}
	for _, img := range imgs {
		if err := writeArchiveFile(filepath.Join(outDir, Archives[img.Name]), img); err != nil {
			return err
		}
	}
	return nil
}

func writeArchiveFile(path string, img Image) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	if err := WriteArchive(f, img); err != nil {
		f.Close()
		return fmt.Errorf("images: %s: %w", img.Name, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// busyboxFiles returns /bin/busybox and a link for each of its applets,
// plus the few files a shell in a pod expects.
func busyboxFiles(busybox string) ([]File, error) {
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("images: the client image needs a static busybox (Debian: apt-get install busybox-static): %w", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("images: %s --list: %w", busybox, err)
	}
	files := []File{
		{Path: "bin/busybox", Mode: 0o755, Data: data},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		{Path: "tmp/.keep", Mode: 0o644},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" && !strings.Contains(applet, "/") {
			files = append(files, File{Path: "bin/" + applet, Link: "busybox"})
		}
	}
	return files, nil
}
