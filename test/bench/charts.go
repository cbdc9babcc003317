package main

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The harness's charts: SVG files drawn with gonum/plot from the same results the
// tables print (a run in memory, or its --json output read back by --charts-from).
// A kept plotting library rather than hand-written SVG: axes, ticks, log scales,
// legends and text layout are its job, and it is maintained elsewhere.

func init() {
	// Liberation Sans has Arial's metrics, so text laid out with it fits wherever the
	// SVG is shown with Arial or Helvetica (svgFonts names them as fallbacks).
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// svgFonts gives the SVG's font family the fallbacks a viewer without Liberation
// Sans needs (vgsvg names the one family only).
func svgFonts(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// chartData is what the charts are drawn from.
type chartData struct {
	aggs           []*aggregate               // scenarios a-f and tracing, one per scenario cell and engine
	memtable       []memtableResult           // the memtable sweep
	appends        map[string][]appendsResult // appends: cell label + "|" + engine -> rounds
	appendsEngines []string                   // appends: engines in report order
	large          [][]largeResult            // large: rounds
}

// chartFile describes one chart written: its file name, its title and its legend
// entries, as drawn.
type chartFile struct {
	Name   string
	Title  string
	Legend []string
}

// figure is one chart before it is drawn: a title and a legend over a grid of plots.
type figure struct {
	chartFile
	keys  *legendKeys
	w, h  vg.Length
	plots [][]*plot.Plot // rows of columns; nil leaves a tile empty
}

// legendKeys are a figure's legend entries, one per name, shown once in a row under
// its title rather than in every panel.
type legendKeys struct {
	names  []string
	thumbs [][]plot.Thumbnailer
}

// add adds an entry unless one of that name is there already.
func (k *legendKeys) add(name string, th ...plot.Thumbnailer) {
	if slices.Contains(k.names, name) {
		return
	}
	k.names = append(k.names, name)
	k.thumbs = append(k.thumbs, th)
}

// draw draws the entries side by side, centred, at the top of c, and returns their height.
func (k *legendKeys) draw(c draw.Canvas) vg.Length {
	if k == nil || len(k.names) == 0 {
		return 0
	}
	l := plot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(11)
	l.Top, l.Left = true, true
	gap := vg.Points(18)
	widths := make([]vg.Length, len(k.names))
	var total vg.Length
	for i, n := range k.names {
		widths[i] = l.ThumbnailWidth + l.TextStyle.Width(" "+n)
		total += widths[i] + gap
	}
	h := l.TextStyle.Height("Xg") + vg.Points(4)
	x := (c.Min.X+c.Max.X)/2 - (total-gap)/2
	for i, n := range k.names {
		one := plot.NewLegend()
		one.TextStyle, one.Top, one.Left = l.TextStyle, true, true
		one.Add(n, k.thumbs[i]...)
		cell := c
		cell.Min = vg.Point{X: x, Y: c.Max.Y - h}
		cell.Max = vg.Point{X: x + widths[i], Y: c.Max.Y}
		one.Draw(cell)
		x += widths[i] + gap
	}
	return h
}

// writeCharts draws every chart the data has material for into dir and returns what
// it wrote. A chart that cannot be drawn is reported in the error; the others are
// still written.
func writeCharts(dir string, d chartData) ([]chartFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("charts folder: %w", err)
	}
	var figs []figure
	var errs []error
	add := func(f *figure, err error) {
		if err != nil {
			errs = append(errs, err)
		} else if f != nil {
			figs = append(figs, *f)
		}
	}
	add(ratioFigure(d.aggs))
	add(throughputFigure(d.aggs))
	for _, f := range latencyFigures(d.aggs) {
		add(f, nil)
	}
	add(memtableFigure(d.memtable))
	add(appendsFigure(d.appends, d.appendsEngines))
	add(largeFigure(d.large))
	var out []chartFile
	for _, f := range figs {
		if f.keys != nil {
			f.Legend = f.keys.names
		}
		if err := f.save(filepath.Join(dir, f.Name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
			continue
		}
		out = append(out, f.chartFile)
	}
	return out, errors.Join(errs...)
}

// save draws the figure into an SVG file at path. gonum/plot panics on some inputs
// (a non-positive value on a log scale); save turns that into an error rather than
// ending the run, although the figures are built to avoid it.
func (f *figure) save(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing: %v", r)
		}
	}()
	sty := plot.New().Title.TextStyle
	sty.Font.Size = vg.Points(15)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	c := vgsvg.New(max(f.w, sty.Width(f.Title)+vg.Points(40)), f.h)
	dc := draw.New(c)
	top := vg.Points(8)
	dc.FillText(sty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - top}, f.Title)
	below := draw.Crop(dc, 0, 0, 0, -(sty.Height(f.Title) + 2*top))
	lh := f.keys.draw(below)
	body := draw.Crop(below, vg.Points(6), -vg.Points(6), vg.Points(6), -(lh + top))
	rows, cols := len(f.plots), 0
	for _, r := range f.plots {
		cols = max(cols, len(r))
	}
	if rows == 0 || cols == 0 {
		return errors.New("no plots")
	}
	grid := make([][]*plot.Plot, rows)
	for i, r := range f.plots {
		grid[i] = make([]*plot.Plot, cols)
		copy(grid[i], r)
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(18), PadY: vg.Points(18)}
	canvases := plot.Align(grid, tiles, body)
	for i, r := range grid {
		for j, p := range r {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	if err := os.WriteFile(path, svgFonts(buf.Bytes()), 0o644); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// engineOrder fixes each engine's colour and glyph across charts.
var engineOrder = []string{kindParallel, kindSerial, kindNative, kindRaw, kindBadger, kindRocklineAppends, "postgresql", "jetstream"}

func engineIndex(name string) int {
	base, _, _ := strings.Cut(name, "/")
	if i := slices.Index(engineOrder, name); i >= 0 {
		return i
	}
	if i := slices.Index(engineOrder, base); i >= 0 {
		return i
	}
	return len(engineOrder) + len(name)%7
}

// engineColor is an engine's colour; the appends scenario's rockline shares
// rockline-parallel's.
func engineColor(name string) color.Color {
	switch name {
	case kindRocklineAppends:
		return plotutil.Color(0)
	case "postgresql":
		return plotutil.Color(5)
	case "jetstream":
		return plotutil.Color(6)
	case kindDiskAppends:
		return color.Gray{Y: 0x80}
	}
	return plotutil.Color(engineIndex(name))
}

// newPlot is a plot with a title, axis labels, grid lines and its legend at the top.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.Add(plotter.NewGrid())
	return p
}

// positive is xs with every value that is not a positive finite number left out, as
// a log scale needs.
func positive(xys plotter.XYs) plotter.XYs {
	return slices.DeleteFunc(xys, func(p plotter.XY) bool { return !(p.Y > 0) || math.IsInf(p.Y, 0) })
}

// finite replaces what is not a finite number by 0, as bar charts need.
func finite(vs plotter.Values) plotter.Values {
	for i, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			vs[i] = 0
		}
	}
	return vs
}

// medianRatio is the median over rounds of a's commits/s over anchor's in the same
// round (runs without errors only); 0 when no round has both.
func medianRatio(a, anchor *aggregate) float64 {
	base := map[int]float64{}
	for _, r := range anchor.runs {
		if r.Error == "" && r.CommitsPerS > 0 {
			base[r.Round] = r.CommitsPerS
		}
	}
	var xs []float64
	for _, r := range a.runs {
		if b, ok := base[r.Round]; ok && r.Error == "" {
			xs = append(xs, r.CommitsPerS/b)
		}
	}
	return median(xs)
}

// cells groups aggregates by scenario cell (label), in order of first appearance.
func cells(aggs []*aggregate) (labels []string, by map[string]map[string]*aggregate) {
	by = map[string]map[string]*aggregate{}
	for _, a := range aggs {
		if by[a.label] == nil {
			by[a.label] = map[string]*aggregate{}
			labels = append(labels, a.label)
		}
		by[a.label][a.engine] = a
	}
	return labels, by
}

// ratioFigure: rockline-parallel's and -serial's commits/s over native-occ's and over
// raw-batch's, per scenario cell, as horizontal bars in two panels.
func ratioFigure(aggs []*aggregate) (*figure, error) {
	keys := &legendKeys{}
	labels, by := cells(aggs)
	var rows []string
	for _, l := range labels {
		e := by[l]
		if e[kindNative] != nil && e[kindRaw] != nil && (e[kindParallel] != nil || e[kindSerial] != nil) {
			rows = append(rows, l)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	slices.Reverse(rows) // the first cell at the top
	rocklines := []string{kindParallel, kindSerial}
	var panels []*plot.Plot
	for i, anchor := range []string{kindNative, kindRaw} {
		p := newPlot("rockline ÷ "+anchor, "commits/s ratio (1 = "+anchor+")", "")
		hi := 1.0
		barH := vg.Points(7)
		for j, eng := range rocklines {
			vs := make(plotter.Values, len(rows))
			for k, l := range rows {
				if a := by[l][eng]; a != nil {
					vs[k] = medianRatio(a, by[l][anchor])
				}
				hi = max(hi, vs[k])
			}
			b, err := plotter.NewBarChart(finite(vs), barH)
			if err != nil {
				return nil, fmt.Errorf("ratio chart: %w", err)
			}
			b.Horizontal = true
			b.Color = engineColor(eng)
			b.LineStyle.Width = 0
			b.Offset = barH * vg.Length(0.5-float64(j)) // the first engine on top, as in the legend
			p.Add(b)
			keys.add(eng, b)
		}
		ref, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(rows)) - 0.5}})
		if err != nil {
			return nil, fmt.Errorf("ratio chart: %w", err)
		}
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
		p.X.Min, p.X.Max = 0, hi*1.45
		p.X.Tick.Marker = stepTicks(0.25)
		names := slices.Clone(rows)
		if i > 0 {
			for k := range names {
				names[k] = "" // the left panel names the cells
			}
		}
		p.NominalY(names...)
		panels = append(panels, p)
	}
	return &figure{
		keys:      keys,
		chartFile: chartFile{Name: "ratios.svg", Title: "rockline commits/s against the anchors, per scenario cell (median of per-round ratios)"},
		w:         13 * vg.Inch, h: vg.Length(2.2+0.3*float64(len(rows))) * vg.Inch,
		plots: [][]*plot.Plot{panels},
	}, nil
}

// rateTicks are gonum/plot's default ticks labelled compactly (80k rather than 80000).
type rateTicks struct{}

// Ticks returns the default ticks between lo and hi with compact labels.
func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = compact(ts[i].Value)
		}
	}
	return ts
}

// compact formats v with a k or M suffix from a thousand up.
func compact(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e4)/100)
	case a >= 1e3:
		return fmt.Sprintf("%gk", math.Round(v/10)/100)
	}
	return fmt.Sprintf("%g", math.Round(v*100)/100)
}

// usTicks mark a log scale of microseconds: each power of ten labelled (10µs, 1ms,
// 1s), 2× and 5× labelled too when the range is under two decades, the rest unlabelled.
type usTicks struct{}

// Ticks returns the ticks between lo and hi (both positive).
func (usTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	few := math.Log10(hi/lo) < 2
	var ts []plot.Tick
	for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)) && len(ts) < 400; d++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, d)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || few && (m == 2 || m == 5) {
				t.Label = fmtMicros(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// fmtMicros formats microseconds for a tick: 20µs, 5ms, 1s.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%gs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%gms", us/1e3)
	}
	return fmt.Sprintf("%gµs", us)
}

// stepTicks marks every step, labelling every other one.
func stepTicks(step float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ts []plot.Tick
		for i := math.Ceil(lo / step); i*step <= hi+1e-9 && len(ts) < 200; i++ {
			t := plot.Tick{Value: i * step}
			if int(i)%2 == 0 {
				t.Label = fmt.Sprintf("%g", i*step)
			}
			ts = append(ts, t)
		}
		return ts
	})
}

// paramInt reads an integer parameter of a run (an int in memory, a float64 from JSON).
func paramInt(p map[string]any, key string) (int, bool) {
	switch v := p[key].(type) {
	case int:
		return v, true
	case float64:
		return int(v), true
	}
	return 0, false
}

// rangeXY is points with a vertical range each (min and max over rounds).
type rangeXY struct {
	plotter.XYs
	lo, hi []float64
}

// YError is point i's distance down to its minimum and up to its maximum.
func (r rangeXY) YError(i int) (float64, float64) { return r.XYs[i].Y - r.lo[i], r.hi[i] - r.XYs[i].Y }

// throughputFigure: scenario a's commits/s against workers, one panel per keys per
// transaction (rows) and commits in flight per worker (columns), a line per engine
// with the range over rounds.
func throughputFigure(aggs []*aggregate) (*figure, error) {
	keys := &legendKeys{}
	type panelKey struct{ k, f int }
	type pt struct{ w, med, lo, hi float64 }
	series := map[panelKey]map[string][]pt{}
	var ks, fs, ws []int
	var engines []string
	for _, a := range aggs {
		if len(a.runs) == 0 || a.runs[0].Scenario != "a" {
			continue
		}
		w, ok1 := paramInt(a.runs[0].Params, "workers")
		k, ok2 := paramInt(a.runs[0].Params, "keys")
		f, ok3 := paramInt(a.runs[0].Params, "inflight")
		cps := a.col(func(r runResult) float64 { return r.CommitsPerS })
		if !ok1 || !ok2 || !ok3 || w <= 0 || len(cps) == 0 {
			continue
		}
		pk := panelKey{k, f}
		if series[pk] == nil {
			series[pk] = map[string][]pt{}
		}
		lo, hi := minMax(cps)
		series[pk][a.engine] = append(series[pk][a.engine], pt{float64(w), median(cps), lo, hi})
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
		if !slices.Contains(engines, a.engine) {
			engines = append(engines, a.engine)
		}
	}
	if len(series) == 0 {
		return nil, nil
	}
	slices.Sort(ks)
	slices.Sort(fs)
	slices.Sort(ws)
	slices.SortStableFunc(engines, func(a, b string) int { return engineIndex(a) - engineIndex(b) })
	var ticks plot.ConstantTicks
	for _, w := range ws {
		ticks = append(ticks, plot.Tick{Value: float64(w), Label: fmt.Sprint(w)})
	}
	grid := make([][]*plot.Plot, len(ks))
	for i, k := range ks {
		grid[i] = make([]*plot.Plot, len(fs))
		for j, f := range fs {
			s := series[panelKey{k, f}]
			if s == nil {
				continue
			}
			p := newPlot(fmt.Sprintf("K=%d keys per commit, F=%d in flight per worker", k, f), "workers (log scale)", "commits/s (median, range over rounds)")
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = ticks
			p.X.Min, p.X.Max = float64(ws[0])/1.25, float64(ws[len(ws)-1])*1.25
			p.Y.Min = 0
			p.Y.Tick.Marker = rateTicks{}
			top := 0.0
			for _, e := range engines {
				pts := s[e]
				if len(pts) == 0 {
					continue
				}
				slices.SortFunc(pts, func(a, b pt) int { return int(a.w - b.w) })
				r := rangeXY{}
				for _, q := range pts {
					r.XYs = append(r.XYs, plotter.XY{X: q.w, Y: q.med})
					r.lo, r.hi = append(r.lo, q.lo), append(r.hi, q.hi)
					top = max(top, q.hi)
				}
				l, sc, err := plotter.NewLinePoints(r.XYs)
				if err != nil {
					return nil, fmt.Errorf("throughput chart: %w", err)
				}
				l.Color, sc.Color = engineColor(e), engineColor(e)
				l.Width = vg.Points(1.5)
				sc.Shape = plotutil.Shape(engineIndex(e))
				eb, err := plotter.NewYErrorBars(r)
				if err != nil {
					return nil, fmt.Errorf("throughput chart: %w", err)
				}
				eb.Color = engineColor(e)
				p.Add(l, sc, eb)
				keys.add(e, l, sc)
			}
			p.Y.Max = top * 1.35 // room for the legend
			grid[i][j] = p
		}
	}
	return &figure{
		keys:      keys,
		chartFile: chartFile{Name: "throughput-workers.svg", Title: "Scenario a: commits/s against workers, per keys per commit and commits in flight"},
		w:         vg.Length(1+5.5*float64(len(fs))) * vg.Inch, h: vg.Length(1+4*float64(len(ks))) * vg.Inch,
		plots: grid,
	}, nil
}

// percentiles are the latency figures the harness keeps, in the order plotted.
var percentiles = []string{"p50", "p95", "p99", "max"}

// latencyFigures: per scenario (a, b, ...), one panel per cell with each engine's
// commit latency at p50, p95, p99 and max (medians over rounds; max is the maximum),
// on a log scale.
func latencyFigures(aggs []*aggregate) []*figure {
	var ids []string
	byID := map[string][]*aggregate{}
	for _, a := range aggs {
		if len(a.runs) == 0 {
			continue
		}
		id := a.runs[0].Scenario
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], a)
	}
	var out []*figure
	for _, id := range ids {
		labels, by := cells(byID[id])
		cols := min(3, len(labels))
		var grid [][]*plot.Plot
		keys := &legendKeys{}
		for n, l := range labels {
			if n%cols == 0 {
				grid = append(grid, make([]*plot.Plot, cols))
			}
			// No Y label: gonum/plot places it by the arithmetic middle of a log axis, which
			// pads the panel; the ticks carry their units (µs, ms, s).
			p := newPlot(l, "percentile (commit latency on a log scale)", "")
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			var pticks plot.ConstantTicks
			for i, name := range percentiles {
				pticks = append(pticks, plot.Tick{Value: float64(i), Label: name})
			}
			p.X.Tick.Marker = pticks
			p.X.Min, p.X.Max = -0.3, float64(len(percentiles))-0.7
			lo, hi := math.Inf(1), 0.0
			engines := make([]string, 0, len(by[l]))
			for _, a := range byID[id] {
				if a.label == l {
					engines = append(engines, a.engine)
				}
			}
			for _, e := range engines {
				a := by[l][e]
				maxLat := 0.0
				for _, v := range a.col(func(r runResult) float64 { return r.CommitLat.Max }) {
					maxLat = max(maxLat, v)
				}
				xys := positive(plotter.XYs{
					{X: 0, Y: median(a.col(func(r runResult) float64 { return r.CommitLat.P50 }))},
					{X: 1, Y: median(a.col(func(r runResult) float64 { return r.CommitLat.P95 }))},
					{X: 2, Y: median(a.col(func(r runResult) float64 { return r.CommitLat.P99 }))},
					{X: 3, Y: maxLat},
				})
				if len(xys) == 0 {
					continue
				}
				line, sc, err := plotter.NewLinePoints(xys)
				if err != nil {
					continue // not finite: nothing to draw for this engine
				}
				line.Color, sc.Color = engineColor(e), engineColor(e)
				sc.Shape = plotutil.Shape(engineIndex(e))
				p.Add(line, sc)
				keys.add(e, line, sc)
				for _, q := range xys {
					lo, hi = min(lo, q.Y), max(hi, q.Y)
				}
			}
			if hi > 0 {
				p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
				p.Y.Tick.Marker = usTicks{}
			} else {
				p.Y.Min, p.Y.Max = 1, 10
			}
			grid[n/cols][n%cols] = p
		}
		if len(keys.names) == 0 {
			continue
		}
		out = append(out, &figure{
			keys: keys,
			chartFile: chartFile{Name: "latency-" + id + ".svg",
				Title: fmt.Sprintf("Scenario %s: commit latency per engine (submit to acknowledgement; medians of rounds, max over rounds)", id)},
			w: vg.Length(1+4.6*float64(cols)) * vg.Inch, h: vg.Length(1+3.6*float64(len(grid))) * vg.Inch,
			plots: grid,
		})
	}
	return out
}

// memtableFigure: the memtable sweep's stall time and device bytes written against
// the write buffer size, a line per max write buffer number (and engine).
func memtableFigure(rs []memtableResult) (*figure, error) {
	lk := &legendKeys{}
	type key struct {
		engine string
		count  int
	}
	var keys []key
	series := map[key]plotter.XYs{}
	stalls := map[key]plotter.XYs{}
	var sizes []float64
	engines := map[string]bool{}
	for _, r := range rs {
		if r.Error != "" || r.WriteBufferMiB <= 0 {
			continue
		}
		k := key{r.Engine, r.WriteBuffers}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		engines[r.Engine] = true
		series[k] = append(series[k], plotter.XY{X: r.WriteBufferMiB, Y: r.DeviceWriteMiB})
		stalls[k] = append(stalls[k], plotter.XY{X: r.WriteBufferMiB, Y: r.StallMillis})
		if !slices.Contains(sizes, r.WriteBufferMiB) {
			sizes = append(sizes, r.WriteBufferMiB)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	slices.Sort(sizes)
	var ticks plot.ConstantTicks
	for _, s := range sizes {
		ticks = append(ticks, plot.Tick{Value: s, Label: fmt.Sprintf("%g", s)})
	}
	name := func(k key) string {
		if len(engines) > 1 {
			return fmt.Sprintf("%s, %d buffers", k.engine, k.count)
		}
		return fmt.Sprintf("max %d write buffers", k.count)
	}
	var panels []*plot.Plot
	for _, m := range []struct {
		title, y string
		data     map[key]plotter.XYs
	}{
		{"Write stalls", "stall time (ms, RocksDB stall micros delta)", stalls},
		{"Device bytes written", "device writes (MiB, /proc/self/io write_bytes)", series},
	} {
		p := newPlot(m.title, "write buffer size (MiB, log scale)", m.y)
		p.Y.Tick.Marker = rateTicks{}
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = sizes[0]/1.25, sizes[len(sizes)-1]*1.25
		p.Y.Min = 0
		top := 0.0
		for i, k := range keys {
			xys := slices.Clone(m.data[k])
			slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
			l, sc, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("memtable chart: %w", err)
			}
			l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
			sc.Shape = plotutil.Shape(i)
			p.Add(l, sc)
			lk.add(name(k), l, sc)
			for _, q := range xys {
				top = max(top, q.Y)
			}
		}
		p.Y.Max = max(top*1.35, 1)
		panels = append(panels, p)
	}
	r := rs[0]
	return &figure{
		keys: lk,
		chartFile: chartFile{Name: "memtable.svg",
			Title: fmt.Sprintf("Memtable sweep: %d commits/s of %d keys × %d B, %.0f s per configuration", r.TargetRate, r.KeysPerCommit, r.ValueBytes, r.Seconds)},
		w: 12 * vg.Inch, h: 5 * vg.Inch,
		plots: [][]*plot.Plot{panels},
	}, nil
}

// shortCell is an appends cell's label without its durability or, unless they are
// shared, its streams (the axis label says how many each worker has).
func shortCell(c appendsCell) string {
	if c.shared {
		return fmt.Sprintf("W=%d K=%d\n%d shared", c.workers, c.k, c.streams)
	}
	return fmt.Sprintf("W=%d K=%d", c.workers, c.k)
}

// groupedBars adds one bar series per name to p over len(groups) nominal groups, the
// value of series i in group j given by v(i, j).
func groupedBars(p *plot.Plot, keys *legendKeys, names []string, groups []string, colors func(i int) color.Color, v func(i, j int) float64) error {
	width := vg.Points(math.Min(22, 60/float64(len(names))))
	for i, n := range names {
		vs := make(plotter.Values, len(groups))
		for j := range groups {
			vs[j] = v(i, j)
		}
		b, err := plotter.NewBarChart(finite(vs), width)
		if err != nil {
			return err
		}
		b.Color = colors(i)
		b.LineStyle.Width = 0
		b.Offset = width * vg.Length(float64(i)-float64(len(names)-1)/2)
		p.Add(b)
		keys.add(n, b)
	}
	p.NominalX(groups...)
	return nil
}

// appendsFigure: appends/s per engine in each cell of the appends scenario, at the
// default durability and with an fsync per append.
func appendsFigure(runs map[string][]appendsResult, engines []string) (*figure, error) {
	keys := &legendKeys{}
	if len(runs) == 0 || len(engines) == 0 {
		return nil, nil
	}
	var panels []*plot.Plot
	for _, sync := range []bool{false, true} {
		var cs []appendsCell
		for _, c := range appendsCells() {
			if c.sync != sync {
				continue
			}
			for _, e := range engines {
				if len(runs[c.label()+"|"+e]) > 0 {
					cs = append(cs, c)
					break
				}
			}
		}
		// The engines with runs in this panel, less the null anchor, whose rate is the
		// harness's own loop and would flatten every other bar (its CPU is in the table).
		var es []string
		for _, e := range engines {
			for _, c := range cs {
				if e != kindNullAppends && len(runs[c.label()+"|"+e]) > 0 {
					es = append(es, e)
					break
				}
			}
		}
		if len(cs) == 0 || len(es) == 0 {
			continue
		}
		title := "Default durability (no fsync per append)"
		if sync {
			title = "An fsync per append"
		}
		streams := 0
		for _, c := range cs {
			if !c.shared {
				streams = c.streams
			}
		}
		p := newPlot(title, fmt.Sprintf("workers W, events per append K (%d streams per worker unless shared)", streams), "appends/s (median of rounds)")
		p.Y.Min = 0
		p.Y.Tick.Marker = rateTicks{}
		groups := make([]string, len(cs))
		for j, c := range cs {
			groups[j] = shortCell(c)
		}
		top := 0.0
		err := groupedBars(p, keys, es, groups, func(i int) color.Color { return engineColor(es[i]) }, func(i, j int) float64 {
			var xs []float64
			for _, r := range runs[cs[j].label()+"|"+es[i]] {
				if r.Error == "" {
					xs = append(xs, r.AppendsPerS)
				}
			}
			m := median(xs)
			top = max(top, m)
			return m
		})
		if err != nil {
			return nil, fmt.Errorf("appends chart: %w", err)
		}
		p.Y.Max = max(top*1.3, 1)
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, nil
	}
	return &figure{
		keys: keys,
		chartFile: chartFile{Name: "appends.svg",
			Title: "Event appends per engine (K events of about 200 B, expecting the exact revision; W workers)"},
		w: vg.Length(1+6*float64(len(panels))) * vg.Inch, h: 5 * vg.Inch,
		plots: [][]*plot.Plot{panels},
	}, nil
}

// largeFigure: the large scenario's commits/s and commit p99 per engine, bloom
// filters on and off.
func largeFigure(rounds [][]largeResult) (*figure, error) {
	keys := &legendKeys{}
	type key struct{ engine, bloom string }
	by := map[key][]largeResult{}
	var engines []string
	var first *largeResult
	for _, round := range rounds {
		for _, r := range round {
			if r.Error != "" {
				continue
			}
			if first == nil {
				first = &r
			}
			by[key{r.Engine, r.Bloom}] = append(by[key{r.Engine, r.Bloom}], r)
			if !slices.Contains(engines, r.Engine) {
				engines = append(engines, r.Engine)
			}
		}
	}
	if len(engines) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(engines, func(a, b string) int { return engineIndex(a) - engineIndex(b) })
	blooms := []string{"on", "off"}
	names := []string{"bloom on", "bloom off"}
	var panels []*plot.Plot
	for _, m := range []struct {
		title, y string
		f        func(largeResult) float64
	}{
		{"Commits/s", "commits/s (median of %d rounds)", func(r largeResult) float64 { return r.CommitsPerS }},
		{"Commit latency p99", "commit p99 (µs, median of %d rounds)", func(r largeResult) float64 { return r.CommitLat.P99 }},
	} {
		p := newPlot(m.title, "engine", fmt.Sprintf(m.y, len(rounds)))
		p.Y.Min = 0
		p.Y.Tick.Marker = rateTicks{}
		top := 0.0
		err := groupedBars(p, keys, names, engines, func(i int) color.Color { return plotutil.Color(i) }, func(i, j int) float64 {
			rs := by[key{engines[j], blooms[i]}]
			xs := make([]float64, len(rs))
			for n, r := range rs {
				xs[n] = m.f(r)
			}
			v := median(xs)
			top = max(top, v)
			return v
		})
		if err != nil {
			return nil, fmt.Errorf("large chart: %w", err)
		}
		p.Y.Max = max(top*1.3, 1)
		panels = append(panels, p)
	}
	return &figure{
		keys: keys,
		chartFile: chartFile{Name: "large.svg",
			Title: fmt.Sprintf("Data larger than the block cache: %d keys, %d MiB cache, %d workers × %d keys read then written",
				first.Keys, first.BlockCacheMiB, first.Workers, first.KeysPerCommit)},
		w: 12 * vg.Inch, h: 5 * vg.Inch,
		plots: [][]*plot.Plot{panels},
	}, nil
}

// appendsEngineNames is the engines' names in report order.
func appendsEngineNames(es []appendsEngine) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}
