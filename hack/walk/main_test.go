package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestWalk: Entry, first (p/entry.go), second and T.m (p/other.go), then
// third (p/entry.go again: one return); third's call of second is not a
// stop again.
func TestWalk(t *testing.T) {
	out := capture(t, func() error { return run("testdata/tiny", "p.Entry", []string{"p"}, -1, false) })
	for _, want := range []string{
		"p.Entry  (p/entry.go)\n  p.first  (p/entry.go)\n  p.second  (p/other.go)\n    (p.T).m  (p/other.go)\n  p.third  (p/entry.go)\n",
		"p.Entry (every depth): 5 stops in 2 files, 1 returns to a file already left",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("walk printed\n%s\nwant it to hold\n%s", out, want)
		}
	}
	out = capture(t, func() error { return run("testdata/tiny", "p.Entry", []string{"p"}, 1, true) })
	if want := "p.Entry (depth ≤ 1): 4 stops in 2 files, 1 returns to a file already left\n"; out != want {
		t.Errorf("-depth 1 -q printed %q, want %q", out, want)
	}
}

// capture returns what f prints on stdout.
func capture(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	ferr := f()
	os.Stdout = stdout
	w.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return buf.String()
}
