// Package client is a typed Go client of Doppel's admin API: the proxies
// with their revisions and compare-and-swap, template files, reload,
// status and access, sessions, the request journal (list, stream, verify,
// clear), fault counters and recording.
//
//	c := client.New("http://127.0.0.1:8081", client.WithToken(token))
//	p, rev, err := c.Proxy(ctx, "shop")
//	p.Loss = &client.Loss{Percentage: 0.2, Status: 503}
//	rev, err = c.UpdateProxy(ctx, p, rev) // in force when it returns
//
// # Errors
//
// Every error Doppel answers is a *Error carrying its HTTP status, its
// code and Doppel's message. Each code of the closed set has a sentinel to
// match with errors.Is:
//
//	if errors.Is(err, client.ErrRevisionMismatch) { /* read again, reapply */ }
//
// A verification that fails is a *VerificationError, which also matches
// ErrVerificationFailed and carries the entries matched. A call never
// panics: a bad base URL, a closed server, an answer that is not the
// API's, and a cancelled context are all errors (the last one matching
// context.Canceled).
//
// # The API it follows
//
// The client is held to the OpenAPI document a Doppel serves at
// /openapi.json: a test fails when an endpoint, a key or a code appears on
// one side and not the other. The document model (Proxy, Mock, Loss, ...)
// has the keys of the YAML configuration; see `doppel config schema`.
//
// In tests, package doppeltest starts a Doppel in-process and hands back
// a Client for it.
//
// Beyond the standard library it imports only this module's closed set of
// error codes: a program using it pulls in no other dependency.
package client
