package journal

// A Page is one answer of the list (GET /api/v1/requests): the entries
// selected, oldest first, at most the filter's limit of them, and how
// many older ones matched beyond it. It holds the kept records, not
// entries: the answer is encoded one entry at a time.
type Page struct {
	ks []*kept
	// More is how many older entries matched beyond the limit.
	More int
}

// List selects what one answer holds: the newest entries visible and
// matching f, at most its limit (DefaultLimit when not given).
func (j *Journal) List(f *Filter, visible func(proxy string) bool) (*Page, error) {
	ks := j.kept()
	limit := f.limit
	if limit == 0 {
		limit = DefaultLimit
	}
	idx, more, err := f.pick(ks, visible, limit)
	if err != nil {
		return nil, err
	}
	p := &Page{ks: make([]*kept, len(idx)), More: more}
	for i, at := range idx {
		p.ks[i] = ks[at]
	}
	return p, nil
}

// Len is how many entries the page holds.
func (p *Page) Len() int { return len(p.ks) }

// Each calls fn with each entry, oldest first, made as it is reached,
// until fn fails.
func (p *Page) Each(fn func(*Entry) error) error {
	for _, k := range p.ks {
		if err := fn(k.entry()); err != nil {
			return err
		}
	}
	return nil
}

// kept are the records kept, oldest first; none when off.
func (j *Journal) kept() []*kept {
	if j == nil {
		return nil
	}
	r := j.ring.Load()
	if r == nil {
		return nil
	}
	return r.kept()
}
