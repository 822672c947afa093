package config

import (
	"strings"
	"testing"
)

const journalBase = "server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\n"

// TestJournalSettings: the bounds of journal.size and journal.bodies, 0
// allowed for both; defaults filled in; a document without journal has
// the revision it had before the section existed.
func TestJournalSettings(t *testing.T) {
	for _, c := range []struct {
		yaml         string
		size, bodies int64
	}{
		{"", 10000, 4096},
		{"journal: {size: 0, bodies: 0}\n", 0, 0},
		{"journal: {size: 50, bodies: 8}\n", 50, 8},
		{"journal: {bodies: 1Mi}\n", 10000, 1 << 20},
	} {
		d, err := Load([]byte(journalBase + c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if int64(*d.Journal.Size) != c.size || int64(*d.Journal.Bodies) != c.bodies {
			t.Errorf("%q: size %d bodies %d", c.yaml, *d.Journal.Size, *d.Journal.Bodies)
		}
	}
	for _, y := range []string{"journal: {size: 1000001}\n", "journal: {size: -1}\n", "journal: {bodies: 2Mi}\n", "journal: {colour: red}\n"} {
		if _, err := Load([]byte(journalBase + y)); err == nil {
			t.Errorf("%q is accepted", y)
		}
	}
	plain, _ := Load([]byte(journalBase))
	explicit, _ := Load([]byte(journalBase + "journal: {size: 10000, bodies: 4Ki}\n"))
	other, _ := Load([]byte(journalBase + "journal: {size: 5}\n"))
	r1, _ := DocumentRevision(plain)
	r2, _ := DocumentRevision(explicit)
	r3, _ := DocumentRevision(other)
	if r1 != r2 || r1 == r3 {
		t.Errorf("revisions: none %s, the defaults %s, size 5 %s", r1, r2, r3)
	}
	if b, _ := Canonical(plain); strings.Contains(string(b), "journal") {
		t.Errorf("a default journal is in the canonical form:\n%s", b)
	}
}

func TestReceipts(t *testing.T) {
	for y, want := range map[string]Receipts{"true": ReceiptsAlways, "false": ReceiptsOff, "on_request": ReceiptsOnRequest} {
		d, err := Load([]byte(journalBase + "proxies: [{name: ab, type: http, url: 'http://x/', receipts: " + y + "}]\n"))
		if err != nil || d.Proxies[0].Receipts != want {
			t.Errorf("receipts: %s -> %v %q", y, err, d.Proxies[0].Receipts)
		}
	}
	if _, err := Load([]byte(journalBase + "proxies: [{name: ab, type: http, url: 'http://x/', receipts: sometimes}]\n")); err == nil {
		t.Error("receipts: sometimes is accepted")
	}
}

// TestJournalHeadersAndBytes: journal.headers (0 to 1Mi, 16Ki by default)
// and journal.bytes (1Mi to 64Gi, 64Mi by default) read like byte sizes;
// their defaults, written or not, leave the revision as it was.
func TestJournalHeadersAndBytes(t *testing.T) {
	for _, c := range []struct {
		yaml           string
		headers, bytes int64
	}{
		{"", 16 << 10, 64 << 20},
		{"journal: {headers: 0, bytes: 1Mi}\n", 0, 1 << 20},
		{"journal: {headers: 1Mi, bytes: 64Gi}\n", 1 << 20, 64 << 30},
		{"journal: {headers: 512, bytes: 2000000}\n", 512, 2_000_000},
	} {
		d, err := Load([]byte(journalBase + c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if int64(d.Journal.HeadersKept()) != c.headers || d.Journal.Budget() != c.bytes {
			t.Errorf("%q: headers %d bytes %d", c.yaml, d.Journal.HeadersKept(), d.Journal.Budget())
		}
	}
	for y, want := range map[string]string{
		"journal: {headers: 2Mi}\n":  "over the journal's 1Mi bound on an entry's headers",
		"journal: {headers: -1}\n":   "keep 0 (no headers) to 1Mi",
		"journal: {bytes: 1000}\n":   "give 1Mi to 64Gi",
		"journal: {bytes: 65Gi}\n":   "give 1Mi to 64Gi",
		"journal: {bytes: 0}\n":      "give 1Mi to 64Gi",
		"journal: {headers: 16K}\n":  "a bare K is ambiguous",
		"journal: {bytes: plenty}\n": "not a byte size",
	} {
		if _, err := Load([]byte(journalBase + y)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", y, err, want)
		}
	}
	plain, _ := Load([]byte(journalBase))
	explicit, _ := Load([]byte(journalBase + "journal: {headers: 16Ki, bytes: 64Mi}\n"))
	sized, _ := Load([]byte(journalBase + "journal: {size: 5}\n"))
	sizedExplicit, _ := Load([]byte(journalBase + "journal: {size: 5, headers: 16384, bytes: 67108864}\n"))
	other, _ := Load([]byte(journalBase + "journal: {bytes: 32Mi}\n"))
	revs := map[string]Revision{}
	for name, d := range map[string]*Document{"plain": plain, "explicit": explicit, "sized": sized, "sized explicit": sizedExplicit, "other": other} {
		r, err := DocumentRevision(d)
		if err != nil {
			t.Fatal(err)
		}
		revs[name] = r
	}
	if revs["plain"] != revs["explicit"] || revs["sized"] != revs["sized explicit"] || revs["other"] == revs["plain"] {
		t.Errorf("revisions: %v", revs)
	}
	if b, _ := Canonical(other); !strings.Contains(string(b), "bytes: 33554432") {
		t.Errorf("journal.bytes is not in the canonical form:\n%s", b)
	}
}
