package config

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

func TestCheckedInSchemaIsCurrent(t *testing.T) {
	want, err := os.ReadFile("../../doppel-config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Schema(), want) {
		t.Fatal("doppel-config.schema.json is stale: run `make schema` and commit the result")
	}
}

func decodeSchema(t *testing.T) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaDescribesEveryField(t *testing.T) {
	s := decodeSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	defs := s["$defs"].(map[string]any)
	objects := map[string]any{"(root)": s}
	for name, d := range defs {
		def := d.(map[string]any)
		if def["properties"] != nil {
			objects[name] = def
		} else if def["description"] == "" || def["description"] == nil {
			t.Errorf("$defs.%s has no description", name)
		}
	}
	for name, o := range objects {
		obj := o.(map[string]any)
		if obj["additionalProperties"] != false {
			t.Errorf("%s allows unknown keys", name)
		}
		for key, p := range obj["properties"].(map[string]any) {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", name, key)
			}
		}
	}
	// Every key of the model is in the schema, and nothing else.
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.Implements(describerType) {
			return
		}
		def, ok := defs[defName(rt)].(map[string]any)
		if rt == reflect.TypeFor[Document]() {
			def, ok = s, true
		}
		if !ok {
			t.Errorf("no schema for %s", rt.Name())
			return
		}
		props := def["properties"].(map[string]any)
		if len(props) != rt.NumField() {
			t.Errorf("%s: %d properties in the schema, %d fields", rt.Name(), len(props), rt.NumField())
		}
		for i := range rt.NumField() {
			walk(rt.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Document]())
}

func TestSchemaBounds(t *testing.T) {
	defs := decodeSchema(t)["$defs"].(map[string]any)
	bounds := map[string][2]float64{
		"Ratio": {0, 1}, "Seconds": {0, 300}, "Port": {1, 65535}, "HttpStatus": {100, 599}, "TimeoutSeconds": {1, 3600},
	}
	for name, b := range bounds {
		d := defs[name].(map[string]any)
		if d["minimum"] != b[0] || d["maximum"] != b[1] {
			t.Errorf("%s bounds are %v..%v, want %v..%v", name, d["minimum"], d["maximum"], b[0], b[1])
		}
	}
	patterns := map[string]string{
		"Name":      "^[A-Za-z0-9_-]{2,64}$",
		"ProxyName": "^[A-Za-z0-9_-]{2,32}$",
	}
	for name, p := range patterns {
		if got := defs[name].(map[string]any)["pattern"]; got != p {
			t.Errorf("%s pattern = %v, want %s", name, got, p)
		}
	}
	methods := defs["HttpMethod"].(map[string]any)["enum"].([]any)
	if len(methods) != len(Methods) || methods[0] != "GET" {
		t.Errorf("Method enum = %v", methods)
	}
	if kinds := defs["ProxyKind"].(map[string]any)["enum"].([]any); len(kinds) != 1 || kinds[0] != "http" {
		t.Errorf("ProxyKind enum = %v", kinds)
	}
	required := decodeSchema(t)["required"].([]any)
	if len(required) != 2 || required[0] != "server" || required[1] != "admin" {
		t.Errorf("root required = %v", required)
	}
}
