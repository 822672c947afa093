package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/goccy/go-yaml"
)

// Revision is a fingerprint of content: 16 lowercase hex digits of the
// SHA-256 of the canonical form. It is never a counter; two edits that
// cancel out return to the revision they started from.
type Revision string

var revisionPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ParseRevision checks a revision a client sent.
func ParseRevision(s string) (Revision, error) {
	if !revisionPattern.MatchString(s) {
		return "", fmt.Errorf("%s is not a revision: a revision is 16 lowercase hex digits", quote(s))
	}
	return Revision(s), nil
}

var canonicalOptions = []yaml.EncodeOption{
	yaml.Indent(2),
	yaml.IndentSequence(true),
	yaml.UseLiteralStyleIfMultiline(true),
}

// Canonical writes a normalised document back as YAML: defaults explicit,
// URLs normalised, sizes as integers, keys in a fixed order and map keys
// sorted. Comments and formatting are not kept; content is.
//
// A journal with every default is left out: the section came after
// Doppel 1.1, whose documents keep their revisions.
func Canonical(d *Document) ([]byte, error) {
	if d.Journal.isDefault() {
		c := *d
		c.Journal = nil
		d = &c
	}
	return yaml.MarshalWithOptions(d, canonicalOptions...)
}

// CanonicalProxy writes one normalised proxy the same way.
func CanonicalProxy(p *Proxy) ([]byte, error) {
	return yaml.MarshalWithOptions(p, canonicalOptions...)
}

// DocumentRevision is the revision of the whole configuration, which reload
// and status report.
func DocumentRevision(d *Document) (Revision, error) {
	b, err := Canonical(d)
	if err != nil {
		return "", err
	}
	return revisionOf(b), nil
}

// ProxyRevision is the revision of one proxy, which the admin API's ETag
// carries.
func ProxyRevision(p *Proxy) (Revision, error) {
	b, err := CanonicalProxy(p)
	if err != nil {
		return "", err
	}
	return revisionOf(b), nil
}

func revisionOf(canonical []byte) Revision {
	sum := sha256.Sum256(canonical)
	return Revision(hex.EncodeToString(sum[:8]))
}
