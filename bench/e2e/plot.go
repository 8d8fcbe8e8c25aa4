package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"slices"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The CDF picture: one panel per latency scenario, latency on a log scale
// from 1 ms to 10 s, floor in grey, mcs-syncer in blue.
const (
	panelW, panelH = 520, 300
	marginL        = 50
	marginB        = 40
	marginT        = 30
	marginR        = 20
	minLatency     = time.Millisecond
	maxLatency     = 10 * time.Second
)

var (
	colorFloor  = color.RGBA{120, 120, 120, 255}
	colorMCS    = color.RGBA{30, 90, 200, 255}
	colorAxis   = color.RGBA{0, 0, 0, 255}
	colorGrid   = color.RGBA{225, 225, 225, 255}
	colorCanvas = color.RGBA{255, 255, 255, 255}
)

// plotCDF draws the latency CDFs of every latency scenario into a PNG.
func plotCDF(path string, results []*latencyResult) error {
	if len(results) == 0 {
		return nil
	}
	cols := min(2, len(results))
	rows := (len(results) + cols - 1) / cols
	img := image.NewRGBA(image.Rect(0, 0, cols*panelW, rows*panelH))
	draw.Draw(img, img.Bounds(), &image.Uniform{colorCanvas}, image.Point{}, draw.Src)
	for i, r := range results {
		origin := image.Pt((i%cols)*panelW, (i/cols)*panelH)
		drawPanel(img, origin, r)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawPanel(img *image.RGBA, o image.Point, r *latencyResult) {
	plotW, plotH := panelW-marginL-marginR, panelH-marginT-marginB
	x0, y0 := o.X+marginL, o.Y+marginT+plotH // the plot's bottom left
	xOf := func(d time.Duration) int {
		d = min(max(d, minLatency), maxLatency)
		f := math.Log10(float64(d)/float64(minLatency)) / math.Log10(float64(maxLatency)/float64(minLatency))
		return x0 + int(f*float64(plotW))
	}
	yOf := func(p float64) int { return y0 - int(p*float64(plotH)) }
	// Grid: every decade, and quarters of probability.
	for d := minLatency; d <= maxLatency; d *= 10 {
		x := xOf(d)
		vline(img, x, yOf(1), y0, colorGrid)
		label(img, x-12, y0+15, fmt.Sprint(d))
	}
	for _, p := range []float64{0, 0.25, 0.5, 0.75, 1} {
		hline(img, x0, x0+plotW, yOf(p), colorGrid)
		label(img, o.X+8, yOf(p)+4, fmt.Sprintf("%.2f", p))
	}
	hline(img, x0, x0+plotW, y0, colorAxis)
	vline(img, x0, yOf(1), y0, colorAxis)
	label(img, x0, o.Y+18, r.Scenario.Name)
	// The legend bottom right, where CDFs of latencies under a second
	// leave room.
	label(img, x0+plotW-150, y0-24, "grey: floor (relay)")
	label(img, x0+plotW-150, y0-10, "blue: mcs-syncer")
	label(img, x0+plotW/2-40, y0+32, "latency (log)")
	for _, s := range []struct {
		samples []time.Duration
		c       color.RGBA
	}{{r.Floor, colorFloor}, {r.MCS, colorMCS}} {
		sorted := slices.Clone(s.samples)
		slices.Sort(sorted)
		px, py := x0, y0
		for i, d := range sorted {
			x, y := xOf(d), yOf(float64(i+1)/float64(len(sorted)))
			hline(img, px, x, py, s.c) // a step: right, then up
			vline(img, x, y, py, s.c)
			px, py = x, y
		}
		hline(img, px, x0+plotW, py, s.c)
	}
}

func hline(img *image.RGBA, xa, xb, y int, c color.RGBA) {
	for x := min(xa, xb); x <= max(xa, xb); x++ {
		img.SetRGBA(x, y, c)
		img.SetRGBA(x, y+1, c)
	}
}

func vline(img *image.RGBA, x, ya, yb int, c color.RGBA) {
	for y := min(ya, yb); y <= max(ya, yb); y++ {
		img.SetRGBA(x, y, c)
		img.SetRGBA(x+1, y, c)
	}
}

func label(img *image.RGBA, x, y int, s string) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(colorAxis), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
