//go:build ignore

// Command diagrams writes the sequence diagrams of docs/faults.md: what
// the client, Doppel and the upstream send each other under each fault.
// Run it from the repository root after changing a fault's behaviour:
//
//	go run docs/faults/diagrams.go
package main

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
)

// The lifelines, left to right.
const (
	client = iota
	doppel
	upstream
)

var laneX = [...]int{330, 560, 790}
var laneName = [...]string{"client", "Doppel", "upstream"}

// A step is one row of a diagram.
type step struct {
	from, to int
	label    string
	kind     string // "msg", "bad" (red), "rst", "fin", "wait", "note"
	note     string // beside the client's lifeline
}

type diagram struct {
	file, title, desc string
	// idle is said under the upstream when it never sees the request.
	idle  bool
	steps []step
}

var diagrams = []diagram{
	{"loss.svg", "loss: answered at once with the loss status",
		"The client's request is answered by Doppel at once with the loss status, Retry-After and the LOSS_INJECTED envelope; the upstream never sees it.",
		true, []step{
			{from: client, to: doppel, label: "GET /orders", kind: "msg"},
			{from: doppel, to: client, label: "429 · Retry-After: 2 · LOSS_INJECTED", kind: "bad", note: "an HTTP error it can retry"},
		}},
	{"abort-request.svg", "abort at request: cut before anything goes upstream",
		"The client sends its request; Doppel cuts the connection with a TCP reset; the upstream never sees the request.",
		true, []step{
			{from: client, to: doppel, label: "POST /pay", kind: "msg"},
			{from: doppel, to: client, label: "RST", kind: "rst", note: "ECONNRESET, no status line"},
		}},
	{"abort-response.svg", "abort at response: the upstream did the work, the client never hears",
		"The request is forwarded and the upstream's whole answer is read, so its side effects happen; then Doppel cuts the client's connection before a byte of the answer is sent.",
		false, []step{
			{from: client, to: doppel, label: "POST /pay", kind: "msg"},
			{from: doppel, to: upstream, label: "POST /pay", kind: "msg"},
			{from: upstream, to: doppel, label: "201 Created · body (read in full)", kind: "msg"},
			{from: doppel, to: client, label: "RST", kind: "rst", note: "ECONNRESET: did my payment go through?"},
		}},
	{"abort-body.svg", "abort at body: the status, the headers, after bytes, then the cut",
		"The upstream answers in full; the client receives the status line, the headers with the full Content-Length, and after bytes of the body; then the connection is cut.",
		false, []step{
			{from: client, to: doppel, label: "GET /report", kind: "msg"},
			{from: doppel, to: upstream, label: "GET /report", kind: "msg"},
			{from: upstream, to: doppel, label: "200 · Content-Length: 4096 · body", kind: "msg"},
			{from: doppel, to: client, label: "200 · Content-Length: 4096", kind: "msg"},
			{from: doppel, to: client, label: "1024 bytes of body (after: 1Ki)", kind: "msg"},
			{from: doppel, to: client, label: "RST (or FIN with how: close)", kind: "rst", note: "a body 3072 bytes short"},
		}},
	{"hang.svg", "hang: nothing for seconds, then a FIN",
		"The request is read and nothing is sent for the hang's seconds; the upstream is never contacted; then Doppel closes the connection with a FIN.",
		true, []step{
			{from: client, to: doppel, label: "GET /search", kind: "msg"},
			{from: doppel, to: doppel, label: "nothing is sent for seconds: 30", kind: "wait", note: "the client waits (its own timeout?)"},
			{from: doppel, to: client, label: "FIN", kind: "fin", note: "EOF with no status line"},
		}},
	{"bandwidth.svg", "bandwidth: the body trickles at bytes_per_second",
		"The status and headers come as usual; the body follows in slices, each sent when it is due at the rate, so 1 MiB at 64 KiB/s takes 16 seconds.",
		false, []step{
			{from: client, to: doppel, label: "GET /export", kind: "msg"},
			{from: doppel, to: upstream, label: "GET /export", kind: "msg"},
			{from: upstream, to: doppel, label: "200 · 1 MiB, read as it is sent", kind: "msg"},
			{from: doppel, to: client, label: "200 · headers at once", kind: "msg"},
			{from: doppel, to: client, label: "3.2 KiB every 50 ms …", kind: "msg"},
			{from: doppel, to: client, label: "… the last byte after 16 s", kind: "msg", note: "a slow body, complete"},
		}},
	{"latency.svg", "latency: the answer waits for its target",
		"The request is forwarded; whatever the upstream took is subtracted from the latency drawn, and the answer's headers wait for the rest.",
		false, []step{
			{from: client, to: doppel, label: "GET /orders", kind: "msg"},
			{from: doppel, to: upstream, label: "GET /orders", kind: "msg"},
			{from: upstream, to: doppel, label: "200 after 120 ms", kind: "msg"},
			{from: doppel, to: doppel, label: "waits 380 ms more (target 500 ms)", kind: "wait"},
			{from: doppel, to: client, label: "200 after 500 ms", kind: "msg", note: "a slow but whole answer"},
		}},
}

const (
	width = 900
	top   = 70
	row   = 46
)

func render(d diagram) string {
	height := top + row*len(d.steps) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" role="img" aria-labelledby="title desc">
  <title id="title">%s</title>
  <desc id="desc">%s</desc>
  <defs>
    <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#44546a"/></marker>
    <marker id="red" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c53030"/></marker>
    <style>
      .lane { stroke: #a0aec0; stroke-width: 1.5; stroke-dasharray: 4 4; }
      .head { fill: #e8eef7; stroke: #44546a; stroke-width: 1.5; }
      .name { font-size: 14px; font-weight: 600; fill: #1a202c; }
      .msg { stroke: #44546a; stroke-width: 1.6; fill: none; }
      .bad { stroke: #c53030; stroke-width: 1.6; fill: none; }
      .label { font-size: 12.5px; fill: #2d3748; }
      .badlabel { font-size: 12.5px; fill: #9b2c2c; font-weight: 600; }
      .note { font-size: 12px; fill: #9b2c2c; font-style: italic; }
      .wait { fill: #fffbea; stroke: #b7791f; stroke-width: 1.2; stroke-dasharray: 4 3; }
    </style>
  </defs>
  <rect width="%d" height="%d" fill="#ffffff"/>
`, width, height, width, height, html.EscapeString(d.title), html.EscapeString(d.desc), width, height)
	for i, x := range laneX {
		fmt.Fprintf(&b, `  <rect class="head" x="%d" y="14" width="120" height="30" rx="15"/><text class="name" x="%d" y="34" text-anchor="middle">%s</text>
  <line class="lane" x1="%d" y1="44" x2="%d" y2="%d"/>
`, x-60, x, laneName[i], x, x, height-16)
	}
	if d.idle {
		fmt.Fprintf(&b, `  <text class="note" x="%d" y="%d" text-anchor="middle">never sees the request</text>
`, laneX[upstream], top+6)
	}
	for i, s := range d.steps {
		y := top + row*i + 14
		x1, x2 := laneX[s.from], laneX[s.to]
		switch s.kind {
		case "wait":
			fmt.Fprintf(&b, `  <rect class="wait" x="%d" y="%d" width="250" height="26" rx="5"/><text class="label" x="%d" y="%d" text-anchor="middle">%s</text>
`, x1-125, y-16, x1, y+1, html.EscapeString(s.label))
		default:
			class, marker, lclass := "msg", "arrow", "label"
			if s.kind != "msg" {
				class, marker, lclass = "bad", "red", "badlabel"
			}
			end := x2
			if x2 < x1 {
				end = x2 + 4
			} else {
				end = x2 - 4
			}
			fmt.Fprintf(&b, `  <line class="%s" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#%s)"/>
  <text class="%s" x="%d" y="%d" text-anchor="middle">%s</text>
`, class, x1, y, end, y, marker, lclass, (x1+x2)/2, y-7, html.EscapeString(s.label))
			switch s.kind {
			case "rst": // a cross: the connection is torn down
				fmt.Fprintf(&b, `  <path d="M%d,%d l10,10 m0,-10 l-10,10" stroke="#c53030" stroke-width="2.5"/>
`, x2-5, y-5)
			case "fin": // a bar: the connection is closed in order
				fmt.Fprintf(&b, `  <path d="M%d,%d v14" stroke="#c53030" stroke-width="3"/>
`, x2, y-7)
			}
		}
		if s.note != "" {
			fmt.Fprintf(&b, `  <text class="note" x="%d" y="%d" text-anchor="end">%s</text>
`, laneX[client]-12, y+4, html.EscapeString(s.note))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func main() {
	for _, d := range diagrams {
		path := filepath.Join("docs", "faults", d.file)
		if err := os.WriteFile(path, []byte(render(d)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
