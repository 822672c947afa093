package apierr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestEveryCodeHasItsStatus(t *testing.T) {
	want := map[Code]int{
		"CONFIG_INVALID": 400, "INVALID_REQUEST_PATH": 400, "UNAUTHORIZED": 401, "FORBIDDEN": 403,
		"NOT_FOUND": 404, "METHOD_NOT_ALLOWED": 405, "PROXY_NOT_RESOLVED": 404, "NO_PROXIES_CONFIGURED": 503,
		"LOSS_INJECTED": 503, "DASHBOARD_NOT_BUILT": 503, "CONFLICT": 409, "REVISION_MISMATCH": 409,
		"UPLOAD_TOO_LARGE": 413, "TEMPLATE_NOT_DECLARED": 422, "REVISION_REQUIRED": 428,
		"TEMPLATE_RENDER_ERROR": 500, "TEMPLATE_NOT_FOUND": 500, "BODY_EXTRACTION_ERROR": 500,
		"STORE_ERROR": 500, "UPSTREAM_ERROR": 502, "UPSTREAM_TIMEOUT": 504, "INTERNAL_ERROR": 500,
		"INVALID_REQUEST_BODY": 400, "REQUEST_TIMEOUT": 408, "RENDER_BUDGET_EXHAUSTED": 503,
		"VERIFICATION_FAILED": 409, "TOO_MANY_SUBSCRIBERS": 429, "REPLICA_UNAVAILABLE": 503,
	}
	if len(Codes()) != len(want) {
		t.Fatalf("%d codes, want %d: the set is closed", len(Codes()), len(want))
	}
	for code, status := range want {
		if code.Status() != status {
			t.Errorf("%s answers %d, want %d", code, code.Status(), status)
		}
	}
}

func TestEnvelope(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "999")
	WriteStatus(rec, 429, LossInjected, `dropped "on purpose"`)
	if rec.Code != 429 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	if rec.Header().Get("Content-Length") == "999" {
		t.Fatal("a stale Content-Length survived")
	}
	want := `{"status":"error","message":"dropped \"on purpose\"","code":"LOSS_INJECTED"}`
	if rec.Body.String() != want {
		t.Fatalf("body %s, want %s", rec.Body, want)
	}
	var e Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	Write(rec, UpstreamTimeout, "slow")
	if rec.Code != http.StatusGatewayTimeout {
		t.Fatalf("Write used %d", rec.Code)
	}
}
