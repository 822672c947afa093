package client_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/internal/apierr"
)

func TestEveryCodeHasASentinel(t *testing.T) {
	var codes []string
	for _, s := range client.Sentinels {
		e := &client.Error{Code: s.Error()[len("doppel: "):]}
		if !errors.Is(e, s) {
			t.Errorf("an error of %s is not errors.Is its sentinel", e.Code)
		}
		codes = append(codes, e.Code)
	}
	for _, c := range apierr.Codes() {
		if !slices.Contains(codes, string(c)) {
			t.Errorf("the code %s has no sentinel in the client", c)
		}
	}
	if len(codes) != len(apierr.Codes()) {
		t.Errorf("%d sentinels for %d codes", len(codes), len(apierr.Codes()))
	}
	if errors.Is(&client.Error{Code: "NOT_FOUND"}, client.ErrConflict) {
		t.Error("NOT_FOUND is errors.Is CONFLICT")
	}
}

func TestReadErrorReadsTheEnvelopeOnly(t *testing.T) {
	e := client.ReadError(503, []byte(`{"status":"error","message":"dropped","code":"LOSS_INJECTED"}`))
	if e == nil || !errors.Is(e, client.ErrLossInjected) || e.Status != 503 || e.Message != "dropped" {
		t.Errorf("the envelope: %#v", e)
	}
	for _, body := range []string{`{"error":"the upstream's own"}`, `<html>502</html>`, ``, `{"status":"error"}`} {
		if e := client.ReadError(502, []byte(body)); e != nil {
			t.Errorf("%q read as Doppel's: %#v", body, e)
		}
	}
}
