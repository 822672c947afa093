package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
)

// TestRequestNesting: a request line is bounded as a document is, before
// encoding/json reads it, and the answer names the bound; a request at
// the bound is read.
func TestRequestNesting(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"command": "reload", "name": ` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}\n")
	}
	const bound = "nested deeper than 64 levels, the bound on a document's nesting (line 1)"
	_, err := parseRequest(deep(config.MaxNesting + 1))
	var inv *config.Invalid
	if !errors.As(err, &inv) || inv.Error() != bound {
		t.Errorf("65 levels: want the nesting bound, got %v", err)
	}
	_, err = parseRequest(deep(config.MaxNesting))
	if err == nil || errors.As(err, &inv) {
		t.Errorf("64 levels: want encoding/json's refusal of a list for a name, got %v", err)
	}

	// The answer on the socket.
	client, server := net.Pipe()
	defer client.Close()
	go (&Server{}).handle(server)
	go func() { _, _ = client.Write(deep(config.MaxNesting + 1)) }()
	line, err := bufio.NewReader(client).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.OK || resp.Code != "CONFIG_INVALID" || len(resp.Violations) != 1 || resp.Violations[0] != bound {
		t.Errorf("the socket answered %s, want CONFIG_INVALID naming the bound", line)
	}
}
