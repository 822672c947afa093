package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// collapseLeadingSlashes turns `//api/x` into `/api/x` for mock matching
// only; `/a//b` keeps its middle segment.
func collapseLeadingSlashes(p string) string {
	i := 0
	for i+1 < len(p) && p[i] == '/' && p[i+1] == '/' {
		i++
	}
	return p[i:]
}

// answerMock answers from the mock chosen, once its faults have let the
// request through: the rendered answer.
func (h *Handler) answerMock(ex *exchange, p *runtime.Proxy, m *runtime.Mock, sub []string) {
	in := render.Input{Submatches: sub, Header: ex.req.Header, RawQuery: ex.req.URL.RawQuery}
	if m.Render.ReadsBody() {
		body, ok := h.readBody(ex, p)
		if !ok {
			return
		}
		in.Body = body
	}
	sys := system(ex)
	a, err := m.Render.Answer(&in, &sys, h.templates, p.Name)
	if err != nil {
		h.mockFailed(ex, err)
		return
	}
	writeAnswer(ex, a)
}

// readBody buffers the request body up to the proxy's body_limit; a larger
// body is refused, never quietly forwarded.
func (h *Handler) readBody(ex *exchange, p *runtime.Proxy) ([]byte, bool) {
	limit := int64(p.Config.BodyLimit)
	if ex.req.ContentLength > limit {
		ex.fail(apierr.UploadTooLarge, fmt.Sprintf("the request body is over the proxy's body_limit of %d bytes", limit))
		return nil, false
	}
	// A client trickling its body holds a connection: each read waits at
	// most bodyIdle and all of them the proxy's timeout; then the
	// connection gets its ordinary reads back.
	br := newBodyReader(ex, ex.start.Add(p.Timeout))
	body, err := io.ReadAll(io.LimitReader(br, limit+1))
	if err != nil {
		if !ex.clientAtFault(br) {
			ex.fail(apierr.BodyExtractionError, "the request body could not be read: "+err.Error())
		}
		return nil, false
	}
	_ = br.rc.SetReadDeadline(time.Time{})
	if int64(len(body)) > limit {
		ex.fail(apierr.UploadTooLarge, fmt.Sprintf("the request body is over the proxy's body_limit of %d bytes", limit))
		return nil, false
	}
	return body, true
}

func system(ex *exchange) render.Request {
	peer := peerIP(ex.req.RemoteAddr)
	return render.Request{
		RequestID: ex.rec.RequestID,
		Path:      ex.rec.Path,
		Host:      ex.req.Host,
		PeerIP:    peer,
		RealIP:    realIP(ex.req.Header, peer),
	}
}

// realIP is who the request says it is from: X-Real-IP, else the leftmost
// X-Forwarded-For entry, else the socket's address.
func realIP(h http.Header, peer string) string {
	if v := strings.TrimSpace(h.Get("X-Real-Ip")); v != "" {
		return v
	}
	if v := h.Get("X-Forwarded-For"); v != "" {
		first, _, _ := strings.Cut(v, ",")
		if first = strings.TrimSpace(first); first != "" {
			return first
		}
	}
	return peer
}

func writeAnswer(ex *exchange, a *render.Answer) {
	hdr := ex.Header()
	// One backing array holds every value: a header is set once each.
	values := make([]string, 0, len(a.Headers)+1)
	for _, kv := range a.Headers {
		values = append(values, kv[1])
		hdr[kv[0]] = values[len(values)-1 : len(values) : len(values)]
	}
	if a.Body != nil {
		values = append(values, strconv.Itoa(len(a.Body)))
		hdr["Content-Length"] = values[len(values)-1 : len(values) : len(values)]
	}
	ex.WriteHeader(a.Status)
	if len(a.Body) > 0 && ex.req.Method != http.MethodHead {
		_, _ = ex.Write(a.Body)
	}
}

func (h *Handler) mockFailed(ex *exchange, err error) {
	var re *render.Error
	if !errors.As(err, &re) {
		ex.fail(apierr.TemplateRenderError, err.Error())
		return
	}
	switch re.Kind {
	case render.TemplateMissing:
		ex.fail(apierr.TemplateNotFound, re.Message)
	case render.BodyNotJSON:
		ex.fail(apierr.BodyExtractionError, re.Message)
	case render.BudgetExhausted:
		// The request line shows only the 503: this line says why.
		h.log.Warn("a mock answer was refused: the process-wide rendering budget is spent",
			"request_id", ex.rec.RequestID, "proxy", ex.rec.Proxy, "mock", ex.rec.Mock, "error", re.Message)
		ex.fail(apierr.RenderBudgetExhausted, re.Message)
	default:
		ex.fail(apierr.TemplateRenderError, re.Message)
	}
}
