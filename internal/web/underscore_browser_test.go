package web_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/recording"
)

// TestBrowserUnderscoreVisible: at 1x zoom the terminal draws the
// underscore of `deploy_key`. With DejaVu Sans Mono at 14 px (Debian's
// monospace) the glyph lies below a row of line height 1, and xterm.js's
// DOM renderer clips each row (xtermjs/xterm.js#4067): the page showed
// "deploy key". The test screenshots the terminal and looks for the
// glyph's pixels in the underscore's cell, from the top of its row to
// half a row below it.
func TestBrowserUnderscoreVisible(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) context.Context
	}{
		{"live", func(t *testing.T) context.Context {
			term := newFakeTerm("underscore")
			ctx := openTerminal(t, startServer(t, sessions{testKey: term}))
			term.emit("\x1b[2J\x1b[Hdeploy_key")
			return ctx
		}},
		{"replay", func(t *testing.T) context.Context {
			path := filepath.Join(t.TempDir(), "underscore.cast")
			w, err := recording.Create(path, recording.Header{Width: 80, Height: 24, Title: "underscore"})
			if err != nil {
				t.Fatal(err)
			}
			w.Output([]byte("\x1b[2J\x1b[Hdeploy_key"))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			ctx := openReplay(t, startReplayServer(t, sessions{}, recordings{testKey: {"underscore", path}}))
			setSpeed(t, ctx, "instant")
			poll(t, ctx, `window.tandem.done()`)
			return ctx
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.open(t)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(1000, 600, chromedp.EmulateScale(1))); err != nil {
				t.Fatal(err)
			}
			underscoreShown(t, ctx)
		})
	}
}

// underscoreShown checks the pixels of the page's terminal, which shows
// deploy_key on its top row.
func underscoreShown(t *testing.T, ctx context.Context) {
	t.Helper()
	poll(t, ctx, `window.tandem.term.buffer.active.getLine(window.tandem.term.buffer.active.viewportY).translateToString(true) === "deploy_key"`)
	// The DOM holds what the renderer drew once a frame has passed.
	poll(t, ctx, `document.querySelector(".xterm-rows > div") && document.querySelector(".xterm-rows > div").textContent.includes("deploy_key")`)
	// A person looks until the page settles (the viewport just changed, so
	// the terminal may still be laying out): the shot is taken again until
	// the glyphs show, or the deadline says they never will.
	var cellW, rowH, scale float64
	var d, under, empty int
	for deadline := time.Now().Add(10 * time.Second); ; {
		geo, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
			const r = document.querySelector(".xterm-screen").getBoundingClientRect();
			const t = window.tandem.term;
			return [r.width / t.cols, r.height / t.rows, window.devicePixelRatio];
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(".xterm-screen")))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		cellW, rowH, scale = geo[0], geo[1], geo[2]
		d, under, empty = litCells(img, cellW, rowH, scale, 0), litCells(img, cellW, rowH, scale, 6), litCells(img, cellW, rowH, scale, 20)
		if (d > 0 && under > 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the next look
	}
	if d == 0 {
		t.Fatalf("no pixel of the 'd' in cell 0: the screenshot does not show the terminal (cell %.1fx%.1f px at %vx)", cellW, rowH, scale)
	}
	if under == 0 {
		t.Errorf("the underscore of deploy_key (cell 6) has no pixel: the row clips it (cell %.1fx%.1f px, row height %.2f x the font size)", cellW, rowH, rowH/14)
	}
	if empty != 0 {
		t.Errorf("an empty cell has %d lit pixels: the threshold is wrong", empty)
	}
}

// litCells counts the pixels of column col, row 0 (and half a row
// below), clearly brighter than the background (#0d1117).
func litCells(img image.Image, cellW, rowH, scale float64, col int) int {
	n := 0
	x0, x1 := int(float64(col)*cellW*scale), int(float64(col+1)*cellW*scale)
	y1 := int(1.5 * rowH * scale)
	for y := 0; y < y1 && y < img.Bounds().Dy(); y++ {
		for x := x0; x < x1 && x < img.Bounds().Dx(); x++ {
			if bright(img, x, y) {
				n++
			}
		}
	}
	return n
}

// bright says whether the pixel at x, y is text rather than background.
func bright(img image.Image, x, y int) bool {
	r, g, b, _ := img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y).RGBA()
	return (r>>8)+(g>>8)+(b>>8) > 3*70
}
