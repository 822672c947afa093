package doppeltest_test

import (
	"os"
	"strings"
	"testing"
)

// TestTheReadmeShowsThisTest: the README's Go test is
// TestCartSurvivesTwo503s as compiled and run here, in under 15 lines.
func TestTheReadmeShowsThisTest(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	const head = "func TestCartSurvivesTwo503s(t *testing.T) {\n"
	shown := between(string(readme), "```go\n"+head, "```\n")
	ran := between(string(src), head, "\n}\n")
	if shown == "" || ran == "" {
		t.Fatalf("the README's test (%d bytes) or the file's (%d bytes) is missing", len(shown), len(ran))
	}
	if strings.TrimSpace(shown) != strings.TrimSpace(ran+"\n}") {
		t.Errorf("the README shows:\n%s\nthe test is:\n%s\n}", shown, ran)
	}
	if n := strings.Count(head+ran, "\n") + 1; n >= 15 {
		t.Errorf("the test is %d lines; the README promises under 15", n)
	}
}

// between is what follows start up to end, start excluded.
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	rest := s[i+len(start):]
	j := strings.Index(rest, end)
	if j < 0 {
		return ""
	}
	return rest[:j]
}
