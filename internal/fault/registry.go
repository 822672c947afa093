package fault

import (
	"fmt"
	"slices"

	"github.com/doppelproxy/doppel/internal/config"
)

// Kind is one kind of fault, as its file registers it.
type Kind struct {
	// Name is the fault's key in the document.
	Name string
	// Order places its roll among the others (SPEC §17.1: loss 10,
	// abort 20, hang 30, bandwidth 40, latency 100); lower rolls first.
	Order int
	// Rolls are every draw the fault makes; no two kinds share one.
	Rolls []Roll
	// Inherited: a mock without its own takes the proxy's (latency).
	// Otherwise a mock has its own or none, never the proxy's (loss).
	Inherited bool
	// Build makes the fault from a proxy's or a mock's settings (mock
	// says which), or returns nil when they declare none.
	Build func(f config.Faults, mock bool) Fault
}

// kinds are the registered kinds in roll order.
var kinds []Kind

func register(k Kind) {
	for _, r := range k.Rolls {
		if r == RollReplace {
			panic(fmt.Sprintf("fault: %s rolls %d, replace's roll", k.Name, r))
		}
	}
	for _, other := range kinds {
		if other.Name == k.Name {
			panic("fault: two kinds named " + k.Name)
		}
		for _, r := range k.Rolls {
			if slices.Contains(other.Rolls, r) {
				panic(fmt.Sprintf("fault: %s and %s both roll %d", k.Name, other.Name, r))
			}
		}
	}
	kinds = append(kinds, k)
	slices.SortStableFunc(kinds, func(a, b Kind) int { return a.Order - b.Order })
}

// Compile makes the faults of a proxy's settings, in roll order; their
// conditions count in counters.
func Compile(proxy config.Faults, counters *Counters) Set {
	var s Set
	for _, k := range kinds {
		if f := k.Build(proxy, false); f != nil {
			s = append(s, condition(f, proxy.When(k.Name), "", k.Name, counters))
		}
	}
	return s
}

// CompileMock makes the faults that apply to the requests a mock answers:
// of each kind, the mock's own (own is nil when the mock has no proxy
// block); failing that, the proxy's for a kind that is inherited, counted
// as the proxy's.
func CompileMock(proxy config.Faults, own *config.Faults, mock string, counters *Counters) Set {
	var s Set
	for _, k := range kinds {
		var f Fault
		if own != nil {
			if f = k.Build(*own, true); f != nil {
				f = condition(f, own.When(k.Name), mock, k.Name, counters)
			}
		}
		if f == nil && k.Inherited {
			if f = k.Build(proxy, false); f != nil {
				f = condition(f, proxy.When(k.Name), "", k.Name, counters)
			}
		}
		if f != nil {
			s = append(s, f)
		}
	}
	return s
}

// condition puts f under w, if any.
func condition(f Fault, w *config.When, mock, name string, counters *Counters) Fault {
	if c := NewCondition(w, mock, name, counters); c != nil {
		return &conditioned{Fault: f, when: c}
	}
	return f
}
