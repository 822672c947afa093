package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// handler writes the layouts of Doppel 1.1, which are those of Rust's
// tracing: in JSON one object a line,
//
//	{"timestamp":"…","level":"INFO","fields":{"message":"…","key":…},"target":"doppel/internal/proxy"}
//
// and in text tracing's default line,
//
//	2026-12-01T16:17:29.189204Z  INFO doppel/internal/proxy: request proxied key=value …
//
// The target is the Go package that logged the line, under the module's
// short name, as tracing names the Rust module.
type handler struct {
	out   *AsyncWriter
	level slog.Leveler
	text  bool
	// attrs are those of With, their keys already under the groups
	// opened before them; group is the prefix of keys added later.
	attrs []slog.Attr
	group string
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(c.attrs[:len(c.attrs):len(c.attrs)], make([]slog.Attr, 0, len(as))...)
	for _, a := range as {
		a.Key = h.group + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	b := h.out.buffer()
	*b = h.appendRecord(*b, r, targetOf(r.PC))
	h.out.enqueue(b)
	return nil
}

func (h *handler) appendRecord(b []byte, r slog.Record, target string) []byte {
	b = lineStart(b, h.text, r.Time, r.Level, r.Message, target)
	for _, a := range h.attrs {
		b = appendAttr(b, h.text, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, h.text, h.group, a)
		return true
	})
	return lineEnd(b, h.text, target)
}

// appendTimestamp writes t as tracing does, RFC 3339 in UTC with
// microseconds (2026-12-01T16:17:29.189204Z), by hand: a layout of
// time's own that is not one of its fast ones costs a request line a
// quarter of its time.
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits writes n (not negative) in width digits, zero-padded; a
// year past 9999 keeps its digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [20]byte
	i := len(d)
	for n > 0 || len(d)-i < width {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[i:]...)
}

// levelName is tracing's name for the level; one between two of them
// takes the lower's.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "TRACE"
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	}
	return "ERROR"
}

// lineStart writes a line up to its message, which in JSON opens fields.
func lineStart(b []byte, text bool, t time.Time, l slog.Level, msg, target string) []byte {
	if t.IsZero() {
		t = time.Now()
	}
	if text {
		b = appendTimestamp(b, t)
		name := levelName(l)
		b = append(b, "      "[:6-len(name)]...) // tracing right-aligns the level in five
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, target...)
		b = append(b, ": "...)
		return append(b, msg...)
	}
	b = append(b, `{"timestamp":"`...)
	b = appendTimestamp(b, t)
	b = append(b, `","level":"`...)
	b = append(b, levelName(l)...)
	b = append(b, `","fields":{"message":`...)
	return appendJSONString(b, msg)
}

// lineEnd closes fields and names the target in JSON, and ends the line.
func lineEnd(b []byte, text bool, target string) []byte {
	if text {
		return append(b, '\n')
	}
	b = append(b, `},"target":`...)
	b = appendJSONString(b, target)
	return append(b, "}\n"...)
}

// appendAttr writes one key and its value; a group's keys are written
// one by one under the group's name.
func appendAttr(b []byte, text bool, prefix string, a slog.Attr) []byte {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range v.Group() {
			b = appendAttr(b, text, prefix, g)
		}
		return b
	}
	if a.Key == "" {
		return b
	}
	if text {
		b = append(b, ' ')
		b = append(b, prefix...)
		b = append(b, a.Key...)
		b = append(b, '=')
		return appendTextValue(b, v)
	}
	b = append(b, ',')
	b = appendJSONString(b, prefix+a.Key)
	b = append(b, ':')
	return appendJSONValue(b, v)
}

func appendJSONValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	case slog.KindTime:
		return appendJSONString(b, v.Time().Format(time.RFC3339Nano))
	}
	x := v.Any()
	if err, ok := x.(error); ok {
		return appendJSONString(b, err.Error())
	}
	j, err := json.Marshal(x)
	if err != nil {
		return appendJSONString(b, fmt.Sprint(x))
	}
	return append(b, j...)
}

// appendTextValue writes a value as tracing's text line does: a string
// quoted, a number or a flag bare.
func appendTextValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return strconv.AppendQuote(b, v.String())
	case slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindFloat64:
		return append(b, v.String()...)
	case slog.KindDuration:
		return append(b, v.Duration().String()...)
	case slog.KindTime:
		return append(b, v.Time().Format(time.RFC3339Nano)...)
	}
	x := v.Any()
	if err, ok := x.(error); ok {
		return strconv.AppendQuote(b, err.Error())
	}
	if j, err := json.Marshal(x); err == nil {
		return append(b, j...)
	}
	return strconv.AppendQuote(b, fmt.Sprint(x))
}

// modulePath is this module's import path; its packages are targets
// under the short name doppel.
const modulePath = "github.com/doppelproxy/doppel"

// targets maps the program counter of a call that logged to its target,
// copied whole on the rare miss so that a hit takes no lock.
var targets atomic.Pointer[map[uintptr]string]

var targetsMu sync.Mutex

// targetOf is the target of the line logged at pc: the package of the
// function that logged it.
func targetOf(pc uintptr) string {
	if m := targets.Load(); m != nil {
		if t, ok := (*m)[pc]; ok {
			return t
		}
	}
	t := "doppel"
	if fn := runtime.FuncForPC(pc); fn != nil {
		t = packageTarget(fn.Name())
	}
	targetsMu.Lock()
	defer targetsMu.Unlock()
	next := map[uintptr]string{pc: t}
	if m := targets.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	targets.Store(&next)
	return t
}

// packageTarget is the target of a function's full name
// (github.com/doppelproxy/doppel/internal/proxy.(*Handler).finish:
// doppel/internal/proxy).
func packageTarget(fn string) string {
	if i := strings.IndexByte(fn, '['); i >= 0 {
		fn = fn[:i] // type arguments may hold paths of their own
	}
	slash := strings.LastIndexByte(fn, '/') + 1
	if dot := strings.IndexByte(fn[slash:], '.'); dot >= 0 {
		fn = fn[:slash+dot]
	}
	switch {
	case fn == "main":
		return "doppel/cmd/doppel"
	case fn == modulePath:
		return "doppel"
	case strings.HasPrefix(fn, modulePath+"/"):
		return "doppel/" + fn[len(modulePath)+1:]
	}
	return fn
}
