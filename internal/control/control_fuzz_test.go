package control

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseRequest feeds the control socket's request parser arbitrary
// lines. It must never panic, and a request it accepts must survive a
// trip through json.Marshal: what Call sends is what handle reads.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"command":"reload"}` + "\n",
		`{"command":"token_add","name":"ci","group":"admin"}` + "\n",
		`{"command":"token_add","name":"ci"}`,
		`{"command":"unknown","extra":[1,2,{"a":null}]}`,
		`{"command":"\u0000\ud800\"\\"}`,
		"{\"command\":\"\xff\xfe\"}",
		`{"Command":"RELOAD","NAME":"x"}`,
		`{"command":1}`,
		`{"command":"reload"} {"command":"token_add"}`,
		`{"command":"reload"`,
		`null`,
		`[]`,
		`"reload"`,
		``,
		"\n",
		`{"command":"reload","command":"token_add"}`,
		`{"name":"` + string(bytes.Repeat([]byte("a"), 1000)) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := parseRequest(line)
		if err != nil {
			return
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted %q, but cannot marshal %+v: %v", line, req, err)
		}
		again, err := parseRequest(append(b, '\n'))
		if err != nil {
			t.Fatalf("accepted %q, but its encoding %s is refused: %v", line, b, err)
		}
		if again != req {
			t.Fatalf("accepted %q as %+v; its encoding %s reads back as %+v", line, req, b, again)
		}
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b, b2) {
			t.Fatalf("the encoding of %q is not stable: %s then %s", line, b, b2)
		}
	})
}
