// Package telemetry sets up logging (and, later, metrics).
package telemetry

import (
	"io"
	"log/slog"
	"strings"
	"sync"
)

// LevelTrace is below debug; slog has no name for it.
const LevelTrace = slog.Level(-8)

// LevelOff is above every level a line is written at: nothing is logged.
const LevelOff = slog.LevelError + 4

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
	text  bool
}

// NewLogger builds a logger writing lines in Doppel 1.1's layouts, json
// or text, to w through an AsyncWriter, so a request never waits on the
// terminal or a pipe. The level is the configured one; the environment's
// (EnvLevel) is the caller's to apply.
func NewLogger(w io.Writer, level, format string) *Logger {
	lv := new(slog.LevelVar)
	if l, ok := ParseLevel(level); ok {
		lv.Set(l)
	}
	out := NewAsyncWriter(w, 4096)
	text := format == "text"
	return &Logger{Logger: slog.New(&handler{out: out, level: lv, text: text}), Level: lv, out: out, text: text}
}

// Flush writes out every line still queued.
func (l *Logger) Flush() { l.out.Flush() }

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
