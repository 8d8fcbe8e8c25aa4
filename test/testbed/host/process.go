package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrNoBinaries is wrapped by every error that says a binary, an image or a
// host package the testbed needs is missing: tests that need real control
// planes or real nodes skip then, saying how to get them.
var ErrNoBinaries = errors.New("the testbed's binaries are missing")

// PollUntil checks cond every 200ms until it holds, it fails, ctx ends or
// timeout passes.
func PollUntil(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}

// ProcessAlive reports whether pid runs: it exists and is not a zombie.
// A zombie main thread is not enough: the main thread of a killed
// multi-threaded process (etcd, kube-apiserver) often exits first and shows
// state Z while its other threads are still exiting and still hold its
// sockets and files, so a process started again at once on its port
// failed with "address already in use". The process is gone only when its
// main thread is a zombie and no other thread is left.
func ProcessAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i < 0 || i+2 >= len(s) || s[i+2] != 'Z' {
		return true
	}
	threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	return len(threads) > 1
}

// ReadPidFile returns the pid that path holds, and false when the file is
// gone or its process is not alive.
func ReadPidFile(path string) (int, bool, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, false, fmt.Errorf("pid file %s: %w", path, err)
	}
	return pid, ProcessAlive(pid), nil
}

// ResidentBytes is the VmRSS of pid: 0 if it is gone (or a zombie, which
// has none).
func ResidentBytes(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, nil // exited since it was listed
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS of pid %d: %w", pid, err)
			}
			return n * 1024, nil
		}
	}
	return 0, nil
}

// IPFamilies lists an IPv4 value and, when set, its IPv6 counterpart, in
// the order dual-stack fields and flags want them.
func IPFamilies(v4, v6 string) []string {
	if v6 == "" {
		return []string{v4}
	}
	return []string{v4, v6}
}

// JoinIPFamilies is IPFamilies as the Kubernetes components' dual-stack
// flags take it: "v4,v6", or "v4" alone.
func JoinIPFamilies(v4, v6 string) string { return strings.Join(IPFamilies(v4, v6), ",") }

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// CPUTime returns the CPU time (user + system) a process has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start behind the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
