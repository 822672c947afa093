package journal

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Headers are a request's or an answer's headers as the journal keeps
// them: every name and value in one byte slice (each a length, then its
// bytes), the values of a name in their order. A kept entry then holds no
// maps and strings for the garbage collector to mark on every cycle, ten
// thousand entries over; the map is made again only when someone reads an
// entry.
//
// A value's length carries in its lowest bit whether journal.headers cut
// it; a pair with no name and that bit set says that headers were left
// out whole. Readers see a cut value as kept, ending with CutMark.
type Headers []byte

// CutMark ends a header name or value the journal cut.
const CutMark = "…"

// flatten keeps h whole, the values of the secret names as Masked.
func flatten(h http.Header, secret []string) Headers {
	p := planFlat(h, secret, -1)
	return p.append(make([]byte, 0, p.size), h, secret)
}

// flatPlan is what keeping one set of headers takes: size bytes, all of
// them (pairs nil), or within journal.headers the pairs chosen.
type flatPlan struct {
	size  int
	pairs []flatPair // nil: every header, whole
	cut   bool       // pairs cut or left some out
}

type flatPair struct {
	name, value string
	cut         bool
}

// planFlat measures h as kept with at most limit bytes of names and
// values (-1: no limit). Headers that fit are kept as they come; past the
// limit the smallest names go first, whole, so that one padded header
// cannot push out the others, and the one the limit falls in is cut.
func planFlat(h http.Header, secret []string, limit int) flatPlan {
	var p flatPlan
	kept := 0
	for name, vs := range h {
		masked := slices.Contains(secret, name)
		for _, v := range vs {
			if masked {
				v = Masked
			}
			kept += len(name) + len(v)
			p.size += pairSize(len(name), len(v))
		}
	}
	if limit < 0 || kept <= limit {
		return p
	}
	type named struct {
		name string
		vs   []string
		size int
	}
	all := make([]named, 0, len(h))
	for name, vs := range h {
		if slices.Contains(secret, name) {
			vs = slices.Repeat([]string{Masked}, len(vs))
		}
		n := named{name: name, vs: vs}
		for _, v := range vs {
			n.size += len(name) + len(v)
		}
		all = append(all, n)
	}
	slices.SortFunc(all, func(a, b named) int {
		return cmp.Or(cmp.Compare(a.size, b.size), strings.Compare(a.name, b.name))
	})
	p = flatPlan{cut: true, pairs: []flatPair{}}
	left := limit
	add := func(fp flatPair) {
		p.pairs = append(p.pairs, fp)
		p.size += pairSize(len(fp.name), len(fp.value))
	}
	for i, n := range all {
		for j, v := range n.vs {
			if need := len(n.name) + len(v); need <= left {
				add(flatPair{name: n.name, value: v})
				left -= need
				continue
			}
			// The limit falls in this value: keep what fits of it (or of
			// its name), marked, and say whether more was left out.
			leftOut := i < len(all)-1 || j < len(n.vs)-1
			switch {
			case left >= len(n.name)+len(CutMark):
				add(flatPair{name: n.name, value: cutAt(v, left-len(n.name)-len(CutMark)) + CutMark, cut: true})
			case left > len(CutMark):
				add(flatPair{name: cutAt(n.name, left-len(CutMark)) + CutMark, cut: true})
			default:
				leftOut = true // nothing of this one fits
			}
			if leftOut {
				add(flatPair{cut: true})
			}
			return p
		}
	}
	return p
}

// cutAt is s's first n bytes at most, not splitting a character.
func cutAt(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func pairSize(name, value int) int {
	return uvarintLen(uint64(name)) + name + uvarintLen(uint64(value)<<1) + value
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// append adds what p keeps of h to b.
func (p *flatPlan) append(b []byte, h http.Header, secret []string) []byte {
	if p.pairs != nil {
		for _, fp := range p.pairs {
			b = appendPair(b, fp.name, fp.value, fp.cut)
		}
		return b
	}
	for name, vs := range h {
		masked := slices.Contains(secret, name)
		for _, v := range vs {
			if masked {
				v = Masked
			}
			b = appendPair(b, name, v, false)
		}
	}
	return b
}

func appendPair(b []byte, name, value string, cut bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	n := uint64(len(value)) << 1
	if cut {
		n |= 1
	}
	b = binary.AppendUvarint(b, n)
	return append(b, value...)
}

// scan calls fn for every pair as kept, the mark of headers left out
// included (no name, cut), until fn says stop.
func (h Headers) scan(fn func(name, value []byte, cut bool) bool) {
	for b := []byte(h); len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return
		}
		name := b[k : k+int(n)]
		b = b[k+int(n):]
		m, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < m>>1 {
			return
		}
		value := b[k : k+int(m>>1)]
		b = b[k+int(m>>1):]
		if !fn(name, value, m&1 == 1) {
			return
		}
	}
}

// each calls fn for every name and value, in order, until fn says stop.
func (h Headers) each(fn func(name, value []byte) bool) {
	h.scan(func(name, value []byte, cut bool) bool {
		if len(name) == 0 && cut {
			return true
		}
		return fn(name, value)
	})
}

// Cut says what journal.headers cut: the names of the values it cut (a
// name cut is among them, with its mark), and whether it left headers out
// whole. Nothing, when all were kept.
func (h Headers) Cut() (names []string, leftOut bool) {
	h.scan(func(name, _ []byte, cut bool) bool {
		switch {
		case cut && len(name) == 0:
			leftOut = true
		case cut:
			names = append(names, string(name))
		}
		return true
	})
	return names, leftOut
}

// Header is the headers as a map.
func (h Headers) Header() http.Header {
	out := http.Header{}
	h.each(func(name, value []byte) bool {
		out[string(name)] = append(out[string(name)], string(value))
		return true
	})
	return out
}

// Values are the values of a header, canonical name.
func (h Headers) Values(name string) []string {
	name = http.CanonicalHeaderKey(name)
	var out []string
	h.each(func(n, v []byte) bool {
		if string(n) == name {
			out = append(out, string(v))
		}
		return true
	})
	return out
}

// Get is a header's first value, or "".
func (h Headers) Get(name string) string {
	if vs := h.Values(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (h Headers) MarshalJSON() ([]byte, error) { return json.Marshal(h.Header()) }

func (h *Headers) UnmarshalJSON(data []byte) error {
	var m http.Header
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*h = flatten(m, nil)
	return nil
}
