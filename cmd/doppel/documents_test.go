package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIEnvelopeIsErrorBody: /openapi.json names the error envelope
// as 1.1 does (components.schemas.ErrorBody), and every error answer of
// every operation refers to it (a failed verification, to the envelope
// with its evidence).
func TestOpenAPIEnvelopeIsErrorBody(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", dashboardDoc(dir, ports[0], ports[1]))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, addr)
	res, err := http.Get("http://" + addr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths      map[string]map[string]struct{ Responses map[string]json.RawMessage }
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var envelope struct{ Required []string }
	if err := json.Unmarshal(doc.Components.Schemas["ErrorBody"], &envelope); err != nil || strings.Join(envelope.Required, ",") != "status,message,code" {
		t.Fatalf("components.schemas.ErrorBody: %s (%v)", doc.Components.Schemas["ErrorBody"], err)
	}
	if _, ok := doc.Components.Schemas["Error"]; ok {
		t.Error("the envelope is still also named Error")
	}
	errors := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for status, reply := range op.Responses {
				if status[0] == '4' || status[0] == '5' {
					if strings.Contains(string(reply), "application/json") {
						errors++
						// A failed verification is the envelope with its evidence added.
						if !strings.Contains(string(reply), "#/components/schemas/ErrorBody") && !strings.Contains(string(reply), "#/components/schemas/VerifyFailure") {
							t.Errorf("%s %s %s does not refer to ErrorBody: %s", method, path, status, reply)
						}
					}
				}
			}
		}
	}
	if errors < 20 {
		t.Errorf("only %d error answers documented", errors)
	}
}
