package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestExchangeContext holds the context an exchange is forwarded under to
// what context.WithValue made: the exchange found by its key, every other
// value, the deadline's cause and a child's cancellation from below.
func TestExchangeContext(t *testing.T) {
	type other struct{}
	ex := &exchange{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), other{}, "kept"))
	ctx := &exchangeContext{Context: parent, ex: ex}
	if exchangeFrom(ctx) != ex || ctx.Value(other{}) != "kept" {
		t.Fatal("the exchange or another value is not found")
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel(errUpstreamTimeout)
	<-child.Done()
	if !errors.Is(context.Cause(ctx), errUpstreamTimeout) || !errors.Is(context.Cause(child), errUpstreamTimeout) {
		t.Fatalf("causes %v and %v", context.Cause(ctx), context.Cause(child))
	}
}

// TestSetValueIsSet holds setValue to Header.Set, and an Add after it to
// copying rather than writing into the next slot.
func TestSetValueIsSet(t *testing.T) {
	var values [2]string
	h := http.Header{"X-Forwarded-For": {"old"}}
	setValue(h, "X-Forwarded-For", values[0:], "10.0.0.1")
	setValue(h, "X-Request-Id", values[1:], "abc")
	want := http.Header{}
	want.Set("X-Forwarded-For", "10.0.0.1")
	want.Set("X-Request-Id", "abc")
	if h.Get("X-Forwarded-For") != "10.0.0.1" || h.Get("X-Request-Id") != "abc" || len(h) != len(want) {
		t.Fatalf("%v, want %v", h, want)
	}
	h.Add("X-Forwarded-For", "10.0.0.2")
	if values[1] != "abc" || h.Get("X-Request-Id") != "abc" || len(h["X-Forwarded-For"]) != 2 {
		t.Fatalf("an Add wrote past its slot: %v, %q", h, values)
	}
}
