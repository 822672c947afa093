package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// The client is written by hand and held to the document a Doppel serves:
// every operation under /api/ is called by the client with the document's
// method and path, and every type the client sends or reads has exactly
// the document's keys, nested types included. An endpoint or a key added,
// renamed or removed on either side fails here.

// notCalled are the operations under /api/ the client leaves out, and why.
var notCalled = map[string]string{
	"uploadTemplatePost": "the same upload as uploadTemplatePut, which the client uses",
}

// types pairs each type of the client with its schema in the document.
var types = []struct {
	value  any
	schema string // a components/schemas name, then a path of properties/items
}{
	{client.Proxy{}, "ProxyConfig"},
	{client.ProxyRevision{}, "ProxyRevision"},
	{client.TemplateFile{}, "TemplateList.templates[]"},
	{client.Counter{}, "CounterList.counters[]"},
	{client.RecordPreview{}, "RecordPreview"},
	{client.ReloadResult{}, "ReloadResult"},
	{client.Status{}, "StatusReport"},
	{client.FleetCount{}, "StatusReport.fleet"},
	{client.Replica{}, "ReplicaList.replicas[]"},
	{client.Access{}, "AccessReport"},
	{client.RequestList{}, "RequestList"},
	{client.MissingReplica{}, "ReplicasAnswered.missing[]"},
	{client.Request{}, "RequestEntry"},
	{client.Verification{}, "Verification"},
	{client.VerifyResult{}, "VerifyResult"},
	{client.Session{}, "Session"},
	{client.SessionInfo{}, "SessionInfo"},
	{client.SessionDetail{}, "SessionRead"},
}

func servedDocument(t *testing.T) map[string]any {
	t.Helper()
	s := doppeltest.New(t, doppeltest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.AdminURL+"/openapi.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestTheClientCallsEveryOperation(t *testing.T) {
	doc := servedDocument(t)
	documented := map[string][2]string{}
	for path, item := range doc["paths"].(map[string]any) {
		if !strings.HasPrefix(path, "/api/") {
			continue // metrics, documentation, the dashboard: for scrapers and browsers
		}
		for method, op := range item.(map[string]any) {
			id := op.(map[string]any)["operationId"].(string)
			documented[id] = [2]string{strings.ToUpper(method), path}
		}
	}
	called := client.Operations()
	for id, want := range documented {
		got, ok := called[id]
		switch {
		case !ok && notCalled[id] == "":
			t.Errorf("%s %s (%s) is served and the client does not call it", want[0], want[1], id)
		case ok && got != want:
			t.Errorf("%s: the client calls %s %s, the document says %s %s", id, got[0], got[1], want[0], want[1])
		}
	}
	for id, got := range called {
		if _, ok := documented[id]; !ok {
			t.Errorf("the client calls %s %s (%s), which the document does not have", got[0], got[1], id)
		}
	}
}

func TestTheClientsTypesHaveTheDocumentsKeys(t *testing.T) {
	doc := servedDocument(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, ty := range types {
		name, path, _ := strings.Cut(ty.schema, ".")
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("%T: no schema %s in the document", ty.value, name)
			continue
		}
		for step := range strings.SplitSeq(path, ".") {
			if step == "" {
				continue
			}
			prop, items := strings.CutSuffix(step, "[]")
			s = resolve(schemas, properties(schemas, s)[prop])
			if items {
				s = resolve(schemas, s["items"])
			}
		}
		compare(t, schemas, reflect.TypeOf(ty.value), s, ty.schema)
	}
}

// compare holds a Go struct to an object schema, both ways, and goes into
// the fields whose types are structs of the client.
func compare(t *testing.T, schemas map[string]any, ty reflect.Type, s map[string]any, where string) {
	t.Helper()
	props := properties(schemas, s)
	if props == nil {
		t.Errorf("%s: %s is not an object in the document", where, ty)
		return
	}
	fields := map[string]reflect.StructField{}
	for f := range ty.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Errorf("%s: %s.%s has no JSON name", where, ty, f.Name)
			continue
		}
		fields[name] = f
	}
	for _, name := range slices.Sorted(mapKeys(props)) {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s: the document has %q, %s has no field for it", where, name, ty)
		}
	}
	for _, name := range slices.Sorted(mapKeys(fields)) {
		f := fields[name]
		p, ok := props[name]
		if !ok {
			t.Errorf("%s: %s.%s is %q, which the document does not have", where, ty, f.Name, name)
			continue
		}
		ft, sub := f.Type, resolve(schemas, p)
		for {
			switch ft.Kind() {
			case reflect.Pointer:
				ft = ft.Elem()
				continue
			case reflect.Slice:
				if ft.Elem().Kind() != reflect.Uint8 { // Body: bytes in a string
					ft, sub = ft.Elem(), resolve(schemas, sub["items"])
					continue
				}
			case reflect.Map:
				ft, sub = ft.Elem(), resolve(schemas, sub["additionalProperties"])
				continue
			}
			break
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == ty.PkgPath() {
			compare(t, schemas, ft, sub, where+"."+name)
		}
	}
}

// resolve follows a $ref.
func resolve(schemas map[string]any, v any) map[string]any {
	s, _ := v.(map[string]any)
	for s != nil {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s, _ = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	return s
}

// properties are an object schema's keys: its own, or those of any of its
// alternatives (oneOf, allOf), as a client decoding it must know them all.
func properties(schemas map[string]any, s map[string]any) map[string]any {
	if p, ok := s["properties"].(map[string]any); ok {
		return p
	}
	var out map[string]any
	for _, k := range []string{"oneOf", "allOf", "anyOf"} {
		alts, _ := s[k].([]any)
		for _, a := range alts {
			for name, p := range properties(schemas, resolve(schemas, a)) {
				if out == nil {
					out = map[string]any{}
				}
				out[name] = p
			}
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
