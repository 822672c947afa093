package client

import (
	"fmt"

	"github.com/doppelproxy/doppel/internal/apierr"
)

// Error is an error answer of Doppel's: the envelope
// {"status":"error","message","code"} with its HTTP status, or an answer
// that is not Doppel's at all (Code empty), such as a gateway's 502 page.
//
// Match a code with errors.Is and the sentinels below; read the message
// and status with errors.As:
//
//	var e *client.Error
//	if errors.As(err, &e) { log.Print(e.Status, e.Message) }
type Error struct {
	// Operation is the API operation that failed, as /openapi.json names
	// it (updateProxy, verifyRequests, ...).
	Operation string
	// Status is the answer's HTTP status.
	Status int
	// Code is one of the closed set (REVISION_MISMATCH, ...); empty when
	// the answer was not Doppel's envelope.
	Code string
	// Message is Doppel's, for people: one line per violation for
	// CONFIG_INVALID.
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("doppel %s: %d: %s", e.Operation, e.Status, e.Message)
	}
	return fmt.Sprintf("doppel %s: %s (%d %s)", e.Operation, e.Message, e.Status, e.Code)
}

// Is reports whether the answer carries the sentinel's code:
// errors.Is(err, client.ErrRevisionMismatch).
func (e *Error) Is(target error) bool {
	c, ok := target.(codeError)
	return ok && e.Code == string(c)
}

// codeError is a sentinel: a code, matched by (*Error).Is.
type codeError apierr.Code

func (c codeError) Error() string { return "doppel: " + string(c) }

// The codes of Doppel's closed set, one sentinel each. The admin API
// answers the first group; the proxy listener the second, which a client
// under test sees in its own answers (ReadError reads them there).
var (
	ErrConfigInvalid       error = codeError(apierr.ConfigInvalid)       // 400: the request or its document breaks a rule
	ErrUnauthorized        error = codeError(apierr.Unauthorized)        // 401: no token, or an unknown one
	ErrForbidden           error = codeError(apierr.Forbidden)           // 403: the token may not do this
	ErrNotFound            error = codeError(apierr.NotFound)            // 404: no such proxy, file or session
	ErrMethodNotAllowed    error = codeError(apierr.MethodNotAllowed)    // 405
	ErrConflict            error = codeError(apierr.Conflict)            // 409: the name is taken, or the store kept moving
	ErrRevisionMismatch    error = codeError(apierr.RevisionMismatch)    // 409: the revision is not the current one
	ErrUploadTooLarge      error = codeError(apierr.UploadTooLarge)      // 413
	ErrTemplateNotDeclared error = codeError(apierr.TemplateNotDeclared) // 422: no mock names the file
	ErrRevisionRequired    error = codeError(apierr.RevisionRequired)    // 428: no revision sent
	ErrStoreError          error = codeError(apierr.StoreError)          // 500: the store failed
	ErrVerificationFailed  error = codeError(apierr.VerificationFailed)  // 409: a verified condition did not hold
	ErrDashboardNotBuilt   error = codeError(apierr.DashboardNotBuilt)   // 503
	ErrTooManySubscribers  error = codeError(apierr.TooManySubscribers)  // 429: 16 streams of the journal per caller, 256 in all
	ErrReplicaUnavailable  error = codeError(apierr.ReplicaUnavailable)  // 503: a fleet-wide verification could not read a live replica's journal

	ErrInvalidRequestPath    error = codeError(apierr.InvalidRequestPath)    // 400
	ErrInvalidRequestBody    error = codeError(apierr.InvalidRequestBody)    // 400
	ErrProxyNotResolved      error = codeError(apierr.ProxyNotResolved)      // 404
	ErrRequestTimeout        error = codeError(apierr.RequestTimeout)        // 408
	ErrNoProxiesConfigured   error = codeError(apierr.NoProxiesConfigured)   // 503
	ErrLossInjected          error = codeError(apierr.LossInjected)          // the configured loss status
	ErrTemplateRenderError   error = codeError(apierr.TemplateRenderError)   // 500
	ErrTemplateNotFound      error = codeError(apierr.TemplateNotFound)      // 500
	ErrBodyExtractionError   error = codeError(apierr.BodyExtractionError)   // 500
	ErrInternalError         error = codeError(apierr.InternalError)         // 500
	ErrRenderBudgetExhausted error = codeError(apierr.RenderBudgetExhausted) // 503
	ErrUpstreamError         error = codeError(apierr.UpstreamError)         // 502
	ErrUpstreamTimeout       error = codeError(apierr.UpstreamTimeout)       // 504
)

// VerificationError is a verification whose conditions did not all hold
// (409 VERIFICATION_FAILED): Message says which, and it carries what was
// found. errors.Is(err, ErrVerificationFailed) holds for it.
type VerificationError struct {
	// Message says which condition failed, and how.
	Message string
	// Matched is how many entries match.
	Matched int
	// GapsMS are the milliseconds between consecutive matched entries.
	GapsMS []float64
	// Requests are the matched entries, oldest first: the newest 100 of
	// them.
	Requests []Request
	// RequestsOmitted counts the older matched entries not in Requests.
	RequestsOmitted int
	// Replicas says whose journals were verified, as VerifyResult does.
	Replicas ReplicasAnswered
	// Partial is true when some replica's journal was missing and
	// Verification.Partial allowed it.
	Partial bool
}

func (e *VerificationError) Error() string {
	return "doppel verifyRequests: " + e.Message + " (409 " + string(apierr.VerificationFailed) + ")"
}

// Is reports whether target is ErrVerificationFailed.
func (e *VerificationError) Is(target error) bool { return target == ErrVerificationFailed }
