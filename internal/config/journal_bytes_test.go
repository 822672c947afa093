package config

import (
	"strings"
	"testing"
)

// TestJournalBodiesReadLikeAByteSize: 0 in any spelling keeps no bodies,
// and past the bound the message names the journal's bound, not a body's.
func TestJournalBodiesReadLikeAByteSize(t *testing.T) {
	for spelled, want := range map[string]string{
		"0": "", "'0'": "", "0Ki": "", "4Ki": "", "1Mi": "",
		"2Gi":    "over the journal's 1Mi bound per body",
		"1025Ki": "over the journal's 1Mi bound per body",
		"4K":     "a bare K is ambiguous",
		"-1":     "keep 0 (no bodies) to 1Mi",
	} {
		_, err := Load([]byte(baseServer + baseAdmin + "journal: {bodies: " + spelled + "}\n"))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", spelled, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", spelled, err, want)
		}
	}
}
