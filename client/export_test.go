package client

// Operations are the endpoints the client calls, for the test holding
// them to /openapi.json: operation id -> method and path.
func Operations() map[string][2]string {
	out := map[string][2]string{}
	for _, o := range operations {
		out[o.id] = [2]string{o.method, o.path}
	}
	return out
}

// Sentinels are the errors of the codes, for the test holding them to the
// closed set.
var Sentinels = []error{
	ErrConfigInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrMethodNotAllowed, ErrConflict,
	ErrRevisionMismatch, ErrUploadTooLarge, ErrTemplateNotDeclared, ErrRevisionRequired, ErrStoreError,
	ErrVerificationFailed, ErrDashboardNotBuilt, ErrInvalidRequestPath, ErrInvalidRequestBody,
	ErrProxyNotResolved, ErrRequestTimeout, ErrNoProxiesConfigured, ErrLossInjected, ErrTemplateRenderError,
	ErrTemplateNotFound, ErrBodyExtractionError, ErrInternalError, ErrRenderBudgetExhausted,
	ErrUpstreamError, ErrUpstreamTimeout, ErrTooManySubscribers, ErrReplicaUnavailable,
}
