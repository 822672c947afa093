package config

// Flow context: brackets, across lines, where indentation means nothing.

// flowCollection reads a flow collection from its opening bracket to its
// closing one, across lines, where indentation means nothing. It reads
// the indicators as the parser's scanner does: a quote, "- ", "? ", an
// anchor or a tag only where no plain scalar is under way, and ':'
// without a space after it where a flow mapping is open.
func (s *nestScanner) flowCollection() {
	plain := false // a plain scalar is under way
	colon := false // the last indicator was a ':'
	maps := 0      // open flow mappings
	tag := false   // the last token was a tag
	for s.i < len(s.src) && !s.over() {
		c := s.src[s.i]
		afterTag := tag
		if !isSpace(c) && !isBreak(c) {
			tag = false
		}
		switch {
		case c == '[' || c == '{':
			s.flow = append(s.flow, flowLevel{seq: c == '['})
			if c == '{' {
				maps++
			}
			s.flowDepth++
			s.reach()
			s.i++
			plain, colon = false, false
		case c == '}' && maps > 0, c == ']' && !(plain && s.seqs() == 0):
			top := s.flow[len(s.flow)-1]
			if !top.seq {
				maps--
			}
			s.flowDepth -= 1 + top.extra
			s.flow = s.flow[:len(s.flow)-1]
			s.i++
			if len(s.flow) == 0 {
				return
			}
			plain, colon = false, false
		case c == ',':
			top := &s.flow[len(s.flow)-1]
			s.flowDepth -= top.extra
			top.extra, top.pair, top.own = 0, false, false
			s.i++
			plain, colon = false, false
		case isBreak(c):
			s.newLine()
		case isSpace(c):
			s.i++
		case c == '#' && (!plain || isSpace(s.src[s.i-1]) || isBreak(s.src[s.i-1])):
			for !s.atLineEnd() {
				s.i++
			}
			plain, colon = false, false
		case plain:
			if c == ':' && s.flowColon(maps, colon) {
				plain, colon = false, true
				continue
			}
			s.i++
		case c == '"' || c == '\'':
			s.quoted()
			colon = false
		case c == '-' && s.entryAt(s.i+1):
			top := &s.flow[len(s.flow)-1]
			top.extra++
			top.pair = false
			s.flowDepth++
			s.reach()
			s.i++
			colon = false
		case c == '?' && s.i+1 < len(s.src) && isSpace(s.src[s.i+1]):
			if top := s.flow[len(s.flow)-1]; top.seq || top.extra > 0 || top.own {
				s.pair() // but a mapping's own "?" and ':' are one pair
			}
			s.i++
			colon = false
		case c == ':' && s.flowColon(maps, colon):
			colon = true
		case c == '!':
			// A tag's name: to the parser's scanner, only a space, a line
			// break or a comma ends it. A pair after it is the tagged
			// node, a level of its own even where a pair is open.
			start := s.i
			for !s.atLineEnd() && s.src[s.i] != ' ' && s.src[s.i] != ',' {
				s.i++
			}
			if name := string(s.src[start:s.i]); (name == "!!seq" || name == "!!omap") && !afterTag {
				s.emptyList()
			}
			tag = true
			s.flow[len(s.flow)-1].pair = false
			colon = false
		case c == '&' || c == '*':
			for !s.nameEnd(false) && !isFlowIndicator(s.src[s.i]) {
				s.i++
			}
			colon = false
		default:
			s.i++
			plain = true
		}
	}
}

// emptyList notes the list the parser makes of a !!seq or !!omap tag
// with nothing after it in its entry: a level, with nothing in it.
func (s *nestScanner) emptyList() {
	j := s.i
	for j < len(s.src) && (isSpace(s.src[j]) || isBreak(s.src[j])) {
		j++
	}
	if j < len(s.src) && s.src[j] != ']' && s.src[j] != '}' && s.src[j] != ',' {
		return
	}
	s.flowDepth++
	s.reach()
	s.flowDepth--
}

// flowColon reads the ':' at s.i inside a flow collection, reporting
// whether it is the value indicator. Where a flow mapping is open it needs
// no space after it, but is text after another ':' with no token between
// and before a '/' (as in http://).
func (s *nestScanner) flowColon(maps int, afterColon bool) bool {
	if maps > 0 {
		if afterColon || s.i+1 < len(s.src) && s.src[s.i+1] == '/' {
			return false
		}
	} else if !s.blankAt(s.i + 1) {
		return false
	}
	s.pair()
	s.i++
	return true
}

// pair notes a pair in the current entry of the innermost flow
// collection: inside a list (or a "- " entry) it is a mapping of its own;
// inside a mapping the first is the mapping's, and another (which the
// parser allows before a flow collection) a mapping in its value.
func (s *nestScanner) pair() {
	top := &s.flow[len(s.flow)-1]
	if !top.seq && top.extra == 0 && !top.own {
		top.own = true
		return
	}
	if !top.pair {
		top.extra++
		top.pair = true
		s.flowDepth++
		s.reach()
	}
}

// seqs counts the open flow lists.
func (s *nestScanner) seqs() int {
	n := 0
	for _, f := range s.flow {
		if f.seq {
			n++
		}
	}
	return n
}

func isFlowIndicator(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}
