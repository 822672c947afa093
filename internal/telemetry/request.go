package telemetry

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Exchange is the one record of a proxied request, filled in as it is
// served: the request line and the metrics both read it, one name per
// fact. Every branch (forwarded, mocked, dropped, unresolved) logs the same
// keys; mock is absent when no mock answered, and the upstream's status
// and duration are absent when no upstream answered.
type Exchange struct {
	RequestID string
	Proxy     string // "" when none resolved
	Mock      string // the mock chosen to answer (its replace fired), "" when none
	Session   string // the session whose overlay served it, "" when none
	Method    string
	Path      string
	Status    int
	Duration  time.Duration // to the response headers
	// ErrorCode is the envelope's code when Doppel answered with one.
	ErrorCode string
	// UpstreamContacted says a connection to the upstream was attempted,
	// a refused one included; UpstreamAnswered that the upstream answered,
	// with UpstreamStatus after UpstreamDuration.
	UpstreamContacted bool
	UpstreamAnswered  bool
	UpstreamStatus    int
	UpstreamDuration  time.Duration
	UpstreamFailed    bool // a transport failure or the proxy's timeout
	// UpstreamCause and UpstreamError say why it failed: one word
	// (connection_refused, dns, tls, reset, timeout, eof, other) and the
	// transport's own text, without the request's URL; "" otherwise.
	UpstreamCause string
	UpstreamError string
	// Faults are the names of the faults that fired, in roll order.
	Faults []string
	// Counter says where its faults' conditions were counted when they
	// are a fleet's: "fleet", or "local" when the database did not answer
	// in time; "" when nothing counted or there is no fleet.
	Counter string
	// Abort is where an abort that fired cuts (request, response, body).
	Abort         string
	LatencyWaited time.Duration // the wait actually taken
	// AdminTokenRemoved names the admin token the request carried to the
	// proxy listener, removed before anything saw it; "" when none.
	AdminTokenRemoved string
	// Tunnel is what an upgraded connection (a WebSocket) carried once
	// the upstream switched protocols; nil for any other exchange. The
	// request is recorded when the tunnel closes.
	Tunnel *Tunnel

	// What only the journal reads, filled only while it is on: the
	// request as sent (its headers once an admin token is withheld), the
	// answer's headers, and the first bytes of both bodies.
	Query          string
	Client         string // the peer's IP
	RequestHeader  http.Header
	ResponseHeader http.Header
	RequestBody    *Capture
	ResponseBody   *Capture
}

// Tunnel counts the bytes an upgraded connection relayed each way.
type Tunnel struct {
	Up       int64         // from the client to the upstream
	Down     int64         // from the upstream to the client
	Duration time.Duration // from the switch to the close
}

// Capture keeps the first Limit bytes of a body as it passes; Cut says
// more came.
type Capture struct {
	Limit int
	Bytes []byte
	Cut   bool
}

// Add keeps what fits of p.
func (c *Capture) Add(p []byte) {
	room := c.Limit - len(c.Bytes)
	if len(p) > room {
		p = p[:room]
		c.Cut = true
	}
	if len(p) > 0 {
		if c.Bytes == nil {
			c.Bytes = make([]byte, 0, len(p))
		}
		c.Bytes = append(c.Bytes, p...)
	}
}

// Fire records that the fault of that name fired; detail is what the
// fault says of it (an abort: where it cuts).
func (r *Exchange) Fire(name, detail string) {
	r.Faults = append(r.Faults, name)
	if name == "abort" {
		r.Abort = detail
	}
}

// Fault is the request line's fault: the one that stood in for or cut the
// answer (loss, abort or hang), "" when none of them fired.
func (r *Exchange) Fault() string {
	// A hang stands in for an answer an abort at response or body was
	// to cut: the hang is what happened.
	abort := false
	for _, f := range r.Faults {
		switch f {
		case "loss", "hang":
			return f
		case "abort":
			abort = true
		}
	}
	if abort {
		return "abort"
	}
	return ""
}

// Fired reports whether the fault of that name fired.
func (r *Exchange) Fired(name string) bool { return slices.Contains(r.Faults, name) }

// The request line's messages, Doppel 1.1's for each branch.
const (
	MsgProxied  = "request proxied"
	MsgRejected = "request rejected"
	MsgFailed   = "upstream failed"
	MsgMocked   = "request mocked"
	MsgDropped  = "request dropped"
)

// requestTarget is the request line's target: the proxy listener's.
const requestTarget = "doppel/internal/proxy"

// Event is the request line's message and level: a drop, an upstream that
// failed (warn), a mock's answer, a request the client got wrong (one no
// proxy resolved, or a 4xx of Doppel's own), else a request proxied. A
// hang or an abort has no message of its own: 1.1 has neither.
func (r *Exchange) Event() (string, slog.Level) {
	switch f := r.Fault(); {
	case f == "loss":
		return MsgDropped, slog.LevelInfo
	case f != "":
		return MsgProxied, slog.LevelInfo
	case r.UpstreamFailed:
		return MsgFailed, slog.LevelWarn
	case r.Mock != "":
		return MsgMocked, slog.LevelInfo
	case r.Proxy == "", r.ErrorCode != "" && r.Status >= 400 && r.Status < 500:
		return MsgRejected, slog.LevelInfo
	}
	return MsgProxied, slog.LevelInfo
}

// LogRequest writes a request line. In JSON it is encoded here directly,
// byte for byte what the handler would write for r.attrs() (a test holds
// the two together) at a fraction of the cost: this runs once per
// request.
func (l *Logger) LogRequest(r *Exchange) {
	msg, level := r.Event()
	if l.Level.Level() > level {
		return
	}
	b := l.out.buffer()
	if l.text {
		line := lineStart(*b, true, time.Now(), level, msg, requestTarget)
		for _, a := range r.attrs() {
			line = appendAttr(line, true, "", a)
		}
		*b = lineEnd(line, true, requestTarget)
	} else {
		*b = appendRequestJSON(*b, time.Now(), msg, level, r)
	}
	l.out.enqueue(b)
}

func (r *Exchange) attrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs, slog.String("request_id", r.RequestID), slog.String("proxy", r.Proxy))
	if r.Mock != "" {
		attrs = append(attrs, slog.String("mock", r.Mock))
	}
	attrs = append(attrs,
		slog.String("method", r.Method),
		slog.String("path", r.Path),
		slog.Int("status", r.Status),
		slog.Int64("duration_ms", r.Duration.Milliseconds()),
		slog.Bool("upstream_contacted", r.UpstreamContacted),
	)
	if r.UpstreamAnswered {
		attrs = append(attrs,
			slog.Int("upstream_status", r.UpstreamStatus),
			slog.Int64("upstream_duration_ms", r.UpstreamDuration.Milliseconds()),
		)
	}
	attrs = append(attrs,
		slog.Bool("loss_injected", r.Fired("loss")),
		slog.Int64("latency_injected_ms", r.LatencyWaited.Milliseconds()),
		slog.String("fault", r.Fault()),
	)
	if r.ErrorCode != "" {
		attrs = append(attrs, slog.String("error_code", r.ErrorCode))
	}
	if r.UpstreamCause != "" {
		attrs = append(attrs, slog.String("cause", r.UpstreamCause), slog.String("error", r.UpstreamError))
	}
	if r.AdminTokenRemoved != "" {
		attrs = append(attrs, slog.String("admin_token_removed", r.AdminTokenRemoved))
	}
	if t := r.Tunnel; t != nil {
		attrs = append(attrs, slog.Int64("tunnel_bytes_up", t.Up), slog.Int64("tunnel_bytes_down", t.Down),
			slog.Int64("tunnel_duration_ms", t.Duration.Milliseconds()))
	}
	return attrs
}

// Millis is a duration in milliseconds with microsecond precision.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func appendRequestJSON(b []byte, now time.Time, msg string, level slog.Level, r *Exchange) []byte {
	b = lineStart(b, false, now, level, msg, requestTarget)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, r.RequestID)
	b = append(b, `,"proxy":`...)
	b = appendJSONString(b, r.Proxy)
	if r.Mock != "" {
		b = append(b, `,"mock":`...)
		b = appendJSONString(b, r.Mock)
	}
	b = append(b, `,"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, r.Duration.Milliseconds(), 10)
	b = append(b, `,"upstream_contacted":`...)
	b = strconv.AppendBool(b, r.UpstreamContacted)
	if r.UpstreamAnswered {
		b = append(b, `,"upstream_status":`...)
		b = strconv.AppendInt(b, int64(r.UpstreamStatus), 10)
		b = append(b, `,"upstream_duration_ms":`...)
		b = strconv.AppendInt(b, r.UpstreamDuration.Milliseconds(), 10)
	}
	b = append(b, `,"loss_injected":`...)
	b = strconv.AppendBool(b, r.Fired("loss"))
	b = append(b, `,"latency_injected_ms":`...)
	b = strconv.AppendInt(b, r.LatencyWaited.Milliseconds(), 10)
	b = append(b, `,"fault":"`...)
	b = append(b, r.Fault()...) // one of a few plain words
	b = append(b, '"')
	if r.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = appendJSONString(b, r.ErrorCode)
	}
	if r.UpstreamCause != "" {
		b = append(b, `,"cause":`...)
		b = appendJSONString(b, r.UpstreamCause)
		b = append(b, `,"error":`...)
		b = appendJSONString(b, r.UpstreamError)
	}
	if r.AdminTokenRemoved != "" {
		b = append(b, `,"admin_token_removed":`...)
		b = appendJSONString(b, r.AdminTokenRemoved)
	}
	if t := r.Tunnel; t != nil {
		b = append(b, `,"tunnel_bytes_up":`...)
		b = strconv.AppendInt(b, t.Up, 10)
		b = append(b, `,"tunnel_bytes_down":`...)
		b = strconv.AppendInt(b, t.Down, 10)
		b = append(b, `,"tunnel_duration_ms":`...)
		b = strconv.AppendInt(b, t.Duration.Milliseconds(), 10)
	}
	return lineEnd(b, false, requestTarget)
}

const hexDigits = "0123456789abcdef"

// appendJSONString escapes as slog's JSON handler does: quotes, backslash
// and control characters; invalid UTF-8 as U+FFFD; U+2028 and U+2029.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
