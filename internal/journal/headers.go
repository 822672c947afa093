package journal

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"slices"
)

// Headers are a request's or an answer's headers as the journal keeps
// them: every name and value in one byte slice (each a length, then its
// bytes), the values of a name in their order. A kept entry then holds no
// maps and strings for the garbage collector to mark on every cycle, ten
// thousand entries over; the map is made again only when someone reads an
// entry.
type Headers []byte

// flatten keeps h, the values of the secret names as Masked.
func flatten(h http.Header, secret []string) Headers {
	b := make([]byte, 0, flatSize(h))
	return appendFlat(b, h, secret)
}

// flatSize bounds what appendFlat adds for h.
func flatSize(h http.Header) int {
	size := 0
	for name, vs := range h {
		for _, v := range vs {
			size += len(name) + max(len(v), len(Masked)) + 2*binary.MaxVarintLen32
		}
	}
	return size
}

func appendFlat(b []byte, h http.Header, secret []string) []byte {
	for name, vs := range h {
		masked := slices.Contains(secret, name)
		for _, v := range vs {
			if masked {
				v = Masked
			}
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// each calls fn for every name and value, in order, until fn says stop.
func (h Headers) each(fn func(name, value []byte) bool) {
	for b := []byte(h); len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return
		}
		name := b[k : k+int(n)]
		b = b[k+int(n):]
		m, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < m {
			return
		}
		value := b[k : k+int(m)]
		b = b[k+int(m):]
		if !fn(name, value) {
			return
		}
	}
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
