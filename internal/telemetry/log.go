// Package telemetry sets up logging (and, later, metrics).
package telemetry

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// LevelTrace is below debug; slog has no name for it.
const LevelTrace = slog.Level(-8)

// EnvLog overrides the configured level when set and not blank.
const EnvLog = "DOPPEL_LOG"

// ParseLevel reads trace, debug, info, warn or error.
func ParseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return LevelTrace, true
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return 0, false
}

// Logger is the process logger and what it writes through.
type Logger struct {
	*slog.Logger
	Level *slog.LevelVar
	out   *AsyncWriter
	json  bool
}

// NewLogger builds a logger writing json or text lines to w through an
// AsyncWriter, so a request never waits on the terminal or a pipe. The
// level comes from the document unless DOPPEL_LOG says otherwise.
func NewLogger(w io.Writer, level, format string) *Logger {
	lv := new(slog.LevelVar)
	if l, ok := ParseLevel(level); ok {
		lv.Set(l)
	}
	if env := os.Getenv(EnvLog); strings.TrimSpace(env) != "" {
		if l, ok := ParseLevel(env); ok {
			lv.Set(l)
		}
	}
	out := NewAsyncWriter(w, 4096)
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: levelNames}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(out, opts)
	} else {
		h = slog.NewJSONHandler(out, opts)
	}
	return &Logger{Logger: slog.New(h), Level: lv, out: out, json: format != "text"}
}

// Flush writes out every line still queued.
func (l *Logger) Flush() { l.out.Flush() }

func levelNames(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey {
		if lv, ok := a.Value.Any().(slog.Level); ok && lv == LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}

// AsyncWriter hands each write to a goroutine that owns the destination,
// so a caller never waits on the terminal or a pipe. A write copies its
// bytes into a pooled buffer and queues it; when the queue is full the
// writer waits rather than dropping a line. Lines are written in order.
type AsyncWriter struct {
	dst   io.Writer
	queue chan queued
	pool  sync.Pool
}

type queued struct {
	line *[]byte
	ack  chan struct{} // set on a flush marker instead of a line
}

// NewAsyncWriter starts the writing goroutine, which lives as long as the
// process: a late log line is still written, never a panic.
func NewAsyncWriter(dst io.Writer, depth int) *AsyncWriter {
	a := &AsyncWriter{dst: dst, queue: make(chan queued, depth)}
	a.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	go a.run()
	return a
}

func (a *AsyncWriter) Write(p []byte) (int, error) {
	b := a.buffer()
	*b = append(*b, p...)
	a.enqueue(b)
	return len(p), nil
}

// buffer is an empty pooled line for a caller that encodes in place.
func (a *AsyncWriter) buffer() *[]byte {
	b := a.pool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// enqueue hands a line from buffer to the writing goroutine.
func (a *AsyncWriter) enqueue(b *[]byte) { a.queue <- queued{line: b} }

func (a *AsyncWriter) run() {
	for q := range a.queue {
		if q.ack != nil {
			close(q.ack)
			continue
		}
		_, _ = a.dst.Write(*q.line)
		if cap(*q.line) <= 64<<10 {
			a.pool.Put(q.line)
		}
	}
}

// Flush returns once every line queued before it has been written.
func (a *AsyncWriter) Flush() {
	ack := make(chan struct{})
	a.queue <- queued{ack: ack}
	<-ack
}

// Nop is a Logger that logs nothing and does no work for it.
func Nop() *Logger {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelError + 1)
	return &Logger{Logger: slog.New(slog.DiscardHandler), Level: lv}
}
