package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
)

// The plot: one SVG drawn from a run's results, with no dependency. Left,
// req/s of every closed-loop run; right, the CPU each request cost; below,
// the delay runs (1 s at scale, and the exact one's error).

const (
	plotWidth  = 980
	rowHeight  = 17
	labelWidth = 230
	barsWidth  = 330
	gap        = 40
)

// plotFrom draws the plot of a saved results file.
func plotFrom(data, out string) error {
	b, err := os.ReadFile(data)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %v", data, err)
	}
	return os.WriteFile(out, []byte(plot(r)), 0o644)
}

type bar struct {
	label, path string
	rps, cpu    float64
	doppel      bool
}

func plot(r results) string {
	var bars []bar
	for _, w := range r.Wrk {
		if len(w.Runs) == 0 {
			continue
		}
		var rps, cpu []float64
		for _, run := range w.Runs {
			rps = append(rps, run.RPS)
			cpu = append(cpu, run.CPUPerReq)
		}
		path := w.Path
		if path == mockPath {
			path = "/mock/{id}"
		}
		bars = append(bars, bar{w.Target, path, median(rps), median(cpu), strings.HasPrefix(w.Target, "doppel")})
	}
	// Grouped by path, in the order the paths first ran; each group has
	// a scale of its own (a 1 MiB body and a 98-byte one are not
	// compared).
	var paths []string
	for _, b := range bars {
		if !slices.Contains(paths, b.path) {
			paths = append(paths, b.path)
		}
	}
	slices.SortStableFunc(bars, func(a, b bar) int { return slices.Index(paths, a.path) - slices.Index(paths, b.path) })
	maxRPS, maxCPU := map[string]float64{}, map[string]float64{}
	for _, b := range bars {
		maxRPS[b.path], maxCPU[b.path] = math.Max(maxRPS[b.path], b.rps), math.Max(maxCPU[b.path], b.cpu)
	}
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	top := 58
	delayRows := 0
	for _, s := range r.Scale {
		if len(s.Runs) > 0 {
			delayRows++
		}
	}
	rows := len(bars) + len(paths)
	height := top + rows*rowHeight + 70 + delayRows*2*rowHeight + 60
	series := rateSeries(r)
	if len(series) > 0 {
		height += rateChartHeight + 70
	}
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		plotWidth, height, plotWidth, height)
	p(`<rect width="100%%" height="100%%" fill="#fff"/>` + "\n")
	p(`<text x="12" y="22" font-size="15" font-weight="bold">Doppel and its peers, one machine, one run (%s, %d rounds, medians)</text>`+"\n",
		r.When.Format("2006-01-02 15:04 UTC"), r.Rounds)
	x1 := labelWidth
	x2 := labelWidth + barsWidth + gap + 10
	if len(bars) > 0 {
		p(`<text x="12" y="40" fill="#555">Closed loop, wrk 32 connections. Blue: Doppel; grey: the peers and the upstream itself (direct). Each path has a scale of its own.</text>` + "\n")
		p(`<text x="%d" y="%d" font-weight="bold">requests per second</text>`+"\n", x1, top-4)
		p(`<text x="%d" y="%d" font-weight="bold">CPU µs per request (less is better)</text>`+"\n", x2, top-4)
	}
	row := 0
	for i, b := range bars {
		if i == 0 || bars[i-1].path != b.path {
			y := top + row*rowHeight
			p(`<text x="12" y="%d" font-weight="bold">%s</text>`+"\n", y+13, html.EscapeString(b.path))
			p(`<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#ccc"/>`+"\n", y+rowHeight, plotWidth, y+rowHeight)
			row++
		}
		y := top + row*rowHeight
		row++
		fill := "#a0a0a0"
		if b.doppel {
			fill = "#2b6cb0"
		}
		if i%2 == 0 {
			p(`<rect x="0" y="%d" width="%d" height="%d" fill="#f4f6f8"/>`+"\n", y, plotWidth, rowHeight)
		}
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelWidth-8, y+12, html.EscapeString(b.label))
		w := scaled(b.rps, maxRPS[b.path], barsWidth)
		p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x1, y+3, w, rowHeight-6, fill)
		p(`<text x="%.1f" y="%d" fill="#333">%.0f</text>`+"\n", float64(x1)+w+4, y+12, b.rps)
		w = scaled(b.cpu, maxCPU[b.path], barsWidth-60)
		p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x2, y+3, w, rowHeight-6, fill)
		p(`<text x="%.1f" y="%d" fill="#333">%.1f</text>`+"\n", float64(x2)+w+4, y+12, b.cpu)
	}

	y := top + rows*rowHeight + 34
	p(`<text x="12" y="%d" font-size="13" font-weight="bold">Delays (open loop, from the scheduled send): total time per request, p50 and p99, as a share of the delay set</text>`+"\n", y)
	y += 14
	for _, s := range r.Scale {
		if len(s.Runs) == 0 {
			continue
		}
		var p50, p99, errs []float64
		for _, run := range s.Runs {
			p50 = append(p50, run.P50us/1e3)
			p99 = append(p99, run.P99us/1e3)
			errs = append(errs, float64(run.Errors+run.Non2xx))
		}
		target := s.TargetMS
		full := 2 * target // a bar ends at twice the delay set
		for j, v := range []struct {
			name string
			ms   float64
		}{{"p50", median(p50)}, {"p99", median(p99)}} {
			yy := y + j*rowHeight
			label := s.Name
			if j == 1 {
				label = ""
			}
			p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelWidth+60, yy+12, html.EscapeString(label))
			p(`<text x="%d" y="%d" fill="#555">%s</text>`+"\n", labelWidth+68, yy+12, v.name)
			bx := float64(labelWidth + 100)
			span := float64(plotWidth - labelWidth - 100 - 270)
			w := scaled(v.ms, full, span)
			fill := "#2b6cb0"
			if s.Server != "" && s.Server != "doppel" {
				fill = "#a0a0a0"
			}
			if v.ms > target*1.1 {
				fill = "#c05621" // more than 10 % late
			}
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", bx, yy+3, w, rowHeight-6, fill)
			tx := bx + scaled(target, full, span)
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="3,2"/>`+"\n", tx, yy, tx, yy+rowHeight)
			note := fmt.Sprintf("%.1f ms (%+.2f ms)", v.ms, v.ms-target)
			if j == 1 && median(errs) > 0 {
				note += fmt.Sprintf(", %.0f errors", median(errs))
			}
			p(`<text x="%.1f" y="%d" fill="#333">%s</text>`+"\n", bx+w+6, yy+12, note)
		}
		y += 2 * rowHeight
	}
	p(`<text x="12" y="%d" fill="#555">Dashed: the delay set (100 %%); a bar stops at 200 %%. Orange: more than 10 %% over it. In brackets: the error, measured minus set.</text>`+"\n", y+22)
	if len(series) > 0 {
		rateChart(p, y+56, series)
	}
	p("</svg>\n")
	return sb.String()
}

func scaled(v, full, width float64) float64 {
	if full <= 0 || math.IsNaN(v) || v <= 0 {
		return 0
	}
	return math.Min(v/full, 1) * width
}

// A 1 s delay against the rate: p50 and p99 of Doppel and of Toxiproxy's
// latency toxic, one line each.

const (
	rateChartHeight = 240
	rateChartLeft   = 90.0
	rateChartWidth  = plotWidth - rateChartLeft - 230
	rateChartMinMS  = 950.0
	rateChartMaxMS  = 1250.0
)

// ratePoint is the medians over rounds at one rate.
type ratePoint struct{ rate, p50, p99, errs float64 }

// rateLine is one server's points, by rate.
type rateLine struct {
	server string
	points []ratePoint
}

// rateSeries are the 1 s delay runs that name their server and rate.
func rateSeries(r results) []rateLine {
	var lines []rateLine
	for _, s := range r.Scale {
		if s.Server == "" || s.Rate <= 0 || s.TargetMS != 1000 || len(s.Runs) == 0 {
			continue
		}
		var p50, p99 []float64
		errs := 0.0
		for _, run := range s.Runs {
			p50 = append(p50, run.P50us/1e3)
			p99 = append(p99, run.P99us/1e3)
			errs += float64(run.Errors + run.Non2xx)
		}
		i := slices.IndexFunc(lines, func(l rateLine) bool { return l.server == s.Server })
		if i < 0 {
			lines = append(lines, rateLine{server: s.Server})
			i = len(lines) - 1
		}
		lines[i].points = append(lines[i].points, ratePoint{s.Rate, median(p50), median(p99), errs})
	}
	for i := range lines {
		slices.SortFunc(lines[i].points, func(a, b ratePoint) int { return int(a.rate - b.rate) })
	}
	return lines
}

// rateChart draws the lines from y down; a point above the chart's top is
// drawn on it, with its value.
func rateChart(p func(string, ...any), y int, lines []rateLine) {
	p(`<text x="12" y="%d" font-size="13" font-weight="bold">A 1 s delay against the rate (open loop): p50 (solid) and p99 (dashed); blue Doppel, grey Toxiproxy's latency toxic</text>`+"\n", y)
	top := float64(y + 24)
	bottom := top + rateChartHeight - 40
	maxRate := 0.0
	for _, l := range lines {
		for _, pt := range l.points {
			maxRate = math.Max(maxRate, pt.rate)
		}
	}
	xOf := func(rate float64) float64 {
		return rateChartLeft + rate/(maxRate*1.1)*rateChartWidth
	}
	yOf := func(ms float64) (float64, bool) {
		if ms > rateChartMaxMS {
			return top, true
		}
		return bottom - (math.Max(ms, rateChartMinMS)-rateChartMinMS)/(rateChartMaxMS-rateChartMinMS)*(bottom-top), false
	}
	for ms := rateChartMinMS; ms <= rateChartMaxMS; ms += 50 {
		yy, _ := yOf(ms)
		stroke := "#e2e8f0"
		if ms == 1100 {
			stroke = "#c05621" // the p99 target
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", rateChartLeft, yy, rateChartLeft+rateChartWidth, yy, stroke)
		p(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%.2f s</text>`+"\n", rateChartLeft-6, yy+4, ms/1000)
	}
	ty, _ := yOf(1100)
	p(`<text x="%.1f" y="%.1f" fill="#c05621">p99 target</text>`+"\n", rateChartLeft+rateChartWidth+6, ty+4)
	for _, l := range lines {
		for _, pt := range l.points {
			x := xOf(pt.rate)
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e8f0"/>`+"\n", x, top, x, bottom)
			p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%.0f/s</text>`+"\n", x, bottom+14, pt.rate)
		}
	}
	for _, l := range lines {
		colour := "#718096"
		if l.server == "doppel" {
			colour = "#2b6cb0"
		}
		for _, stat := range []struct {
			dash string
			ms   func(ratePoint) float64
		}{{"", func(pt ratePoint) float64 { return pt.p50 }}, {` stroke-dasharray="5,3"`, func(pt ratePoint) float64 { return pt.p99 }}} {
			var pts []string
			for _, pt := range l.points {
				yy, _ := yOf(stat.ms(pt))
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(pt.rate), yy))
			}
			p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), colour, stat.dash)
			for _, pt := range l.points {
				yy, over := yOf(stat.ms(pt))
				p(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", xOf(pt.rate), yy, colour)
				if over {
					p(`<text x="%.1f" y="%.1f" fill="%s">%.2f s</text>`+"\n", xOf(pt.rate)+6, yy+12, colour, stat.ms(pt)/1000)
				}
			}
		}
	}
	// The legend, right of the chart.
	ly := top + 40
	for _, l := range lines {
		colour := "#718096"
		if l.server == "doppel" {
			colour = "#2b6cb0"
		}
		for _, stat := range []struct{ name, dash string }{{"p50", ""}, {"p99", ` stroke-dasharray="5,3"`}} {
			lx := rateChartLeft + rateChartWidth + 12
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+28, ly, colour, stat.dash)
			p(`<text x="%.1f" y="%.1f" fill="%s">%s %s</text>`+"\n", lx+34, ly+4, colour, html.EscapeString(l.server), stat.name)
			ly += 16
		}
	}
	p(`<text x="12" y="%.1f" fill="#555">A point above the top is drawn on it with its value. Errors (timeouts, refused connections) are in the report's table.</text>`+"\n", bottom+34)
}
