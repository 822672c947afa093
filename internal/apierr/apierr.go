// Package apierr is the closed set of error codes Doppel answers with, and
// the one envelope they travel in, on both listeners:
//
//	{"status":"error","message":"...","code":"..."}
//
// An upstream's own answer is never wrapped: only errors Doppel itself
// produces are.
package apierr

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Code is one of the error codes below; the set is closed.
type Code string

// The codes and, through Status, the HTTP status each is answered with.
const (
	ConfigInvalid       Code = "CONFIG_INVALID"
	InvalidRequestPath  Code = "INVALID_REQUEST_PATH"
	Unauthorized        Code = "UNAUTHORIZED"
	Forbidden           Code = "FORBIDDEN"
	NotFound            Code = "NOT_FOUND"
	MethodNotAllowed    Code = "METHOD_NOT_ALLOWED"
	ProxyNotResolved    Code = "PROXY_NOT_RESOLVED"
	NoProxiesConfigured Code = "NO_PROXIES_CONFIGURED"
	LossInjected        Code = "LOSS_INJECTED" // answered with the configured loss status
	DashboardNotBuilt   Code = "DASHBOARD_NOT_BUILT"
	Conflict            Code = "CONFLICT"
	RevisionMismatch    Code = "REVISION_MISMATCH"
	UploadTooLarge      Code = "UPLOAD_TOO_LARGE"
	TemplateNotDeclared Code = "TEMPLATE_NOT_DECLARED"
	RevisionRequired    Code = "REVISION_REQUIRED"
	TemplateRenderError Code = "TEMPLATE_RENDER_ERROR"
	TemplateNotFound    Code = "TEMPLATE_NOT_FOUND"
	BodyExtractionError Code = "BODY_EXTRACTION_ERROR"
	StoreError          Code = "STORE_ERROR"
	UpstreamError       Code = "UPSTREAM_ERROR"
	UpstreamTimeout     Code = "UPSTREAM_TIMEOUT"
	InternalError       Code = "INTERNAL_ERROR" // a fault of Doppel's own (a recovered panic)
	// The client's own mistakes and stalls, never blamed on the upstream.
	InvalidRequestBody Code = "INVALID_REQUEST_BODY" // malformed framing: a bad chunk, a body shorter than its Content-Length
	RequestTimeout     Code = "REQUEST_TIMEOUT"      // the client stopped sending its body
	// The process-wide rendering budget is spent by renders under way.
	RenderBudgetExhausted Code = "RENDER_BUDGET_EXHAUSTED"
	// A journal verification whose conditions did not all hold (SPEC §17.4).
	VerificationFailed Code = "VERIFICATION_FAILED"
	// A stream of the journal over the bound per caller or in all (SPEC §18.4).
	TooManySubscribers Code = "TOO_MANY_SUBSCRIBERS"
	// ReplicaUnavailable: a fleet-wide verification could not read every
	// live replica's journal (SPEC §18.1).
	ReplicaUnavailable Code = "REPLICA_UNAVAILABLE"
)

var statuses = map[Code]int{
	ConfigInvalid:         http.StatusBadRequest,
	InvalidRequestPath:    http.StatusBadRequest,
	Unauthorized:          http.StatusUnauthorized,
	Forbidden:             http.StatusForbidden,
	NotFound:              http.StatusNotFound,
	MethodNotAllowed:      http.StatusMethodNotAllowed,
	ProxyNotResolved:      http.StatusNotFound,
	NoProxiesConfigured:   http.StatusServiceUnavailable,
	LossInjected:          http.StatusServiceUnavailable,
	DashboardNotBuilt:     http.StatusServiceUnavailable,
	Conflict:              http.StatusConflict,
	RevisionMismatch:      http.StatusConflict,
	UploadTooLarge:        http.StatusRequestEntityTooLarge,
	TemplateNotDeclared:   http.StatusUnprocessableEntity,
	RevisionRequired:      http.StatusPreconditionRequired,
	TemplateRenderError:   http.StatusInternalServerError,
	TemplateNotFound:      http.StatusInternalServerError,
	BodyExtractionError:   http.StatusInternalServerError,
	StoreError:            http.StatusInternalServerError,
	UpstreamError:         http.StatusBadGateway,
	UpstreamTimeout:       http.StatusGatewayTimeout,
	InternalError:         http.StatusInternalServerError,
	InvalidRequestBody:    http.StatusBadRequest,
	RequestTimeout:        http.StatusRequestTimeout,
	RenderBudgetExhausted: http.StatusServiceUnavailable,
	VerificationFailed:    http.StatusConflict,
	TooManySubscribers:    http.StatusTooManyRequests,
	ReplicaUnavailable:    http.StatusServiceUnavailable,
}

// Codes lists every code, for documentation and tests.
func Codes() []Code {
	out := make([]Code, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	return out
}

// Status is the HTTP status a code is answered with. LOSS_INJECTED's is the
// configured one; 503 is only its fallback.
func (c Code) Status() int { return statuses[c] }

// Envelope is the body of every error Doppel produces.
type Envelope struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Code    Code   `json:"code"`
}

// Write answers with the code's own status.
func Write(w http.ResponseWriter, code Code, message string) {
	WriteStatus(w, code.Status(), code, message)
}

// WriteStatus answers with an explicit status (the loss status).
func WriteStatus(w http.ResponseWriter, status int, code Code, message string) {
	body, _ := json.Marshal(Envelope{Status: "error", Message: message, Code: code})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Raw is a whole HTTP/1.1 answer with the envelope, closing the
// connection: for the few answers written to a connection before any
// handler runs.
func Raw(code Code, message string) []byte {
	body, _ := json.Marshal(Envelope{Status: "error", Message: message, Code: code})
	status := code.Status()
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), len(body))
	return append([]byte(head), body...)
}
