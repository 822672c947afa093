package change

import (
	"slices"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
)

// TestToxiproxyNeedsARestart: the toxiproxy listener is bound at start, so
// a reload that sets, moves or removes it says so.
func TestToxiproxyNeedsARestart(t *testing.T) {
	load := func(section string) *config.Document {
		d, err := config.Load([]byte(doc + section))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	off, on, moved := load(""), load("toxiproxy: {host: 127.0.0.1, port: 8474}\n"), load("toxiproxy: {host: 127.0.0.1, port: 8475}\n")
	for _, c := range []struct {
		name     string
		from, to *config.Document
		want     bool
	}{
		{"set", off, on, true},
		{"moved", on, moved, true},
		{"removed", moved, off, true},
		{"the same", on, load("toxiproxy: {host: 127.0.0.1, port: 8474}\n"), false},
		{"absent both", off, load(""), false},
	} {
		if got := slices.Contains(Unapplied(c.from, c.to), "toxiproxy"); got != c.want {
			t.Errorf("%s: toxiproxy unapplied %v, want %v", c.name, got, c.want)
		}
	}
}
