package config

import "bytes"

// Block context: a line at a time, collections told apart by the column
// of their entries.

// line reads one line in block context.
func (s *nestScanner) line() {
	s.lineStart = s.i
	// The parser's scanner measures a line's indentation to its first
	// character that is neither a space nor a tab.
	s.skipSpaces()
	indent := s.i - s.lineStart
	if s.atLineEnd() {
		// A blank line neither ends a block scalar nor a plain one.
		s.literalBlank = s.literalBlank || s.literal
		s.newLine()
		return
	}
	if indent == 0 && s.documentMarker(s.literal) {
		// A new document: nothing carries over.
		s.block = s.block[:0]
		s.literal, s.glued = false, false
		s.plainOwner, s.lastScalar, s.lastExplicit, s.explicitNext = noPlain, -1, false, -1
		s.delim = -1
		s.emptyEntry, s.dangling, s.anchorName = -1, false, false
		s.i += 3
		s.node()
		return
	}
	if s.literal {
		if s.literalIndent < 0 && indent > s.literalParent {
			s.literalIndent = indent
			if s.literalFirst >= 0 {
				s.literalIndent = s.literalFirst
			}
			if s.literalIndent > 0 {
				s.delim = s.literalIndent - 1 // the parser's, from here on
			}
			s.skipLine()
			return
		}
		if s.literalIndent >= 0 && indent >= s.literalIndent {
			s.skipLine()
			return
		}
		s.literal = false
		s.glued = s.literalIndent < 0 && s.literalBlank
		s.lastScalar = s.literalCol // a ':' here makes it a key
	}
	if s.src[s.i] == '#' {
		// A comment line ends a plain scalar, and changes nothing else.
		s.plainOwner = noPlain
		s.skipLine()
		return
	}
	owner, scalar, explicit := s.plainOwner, s.lastScalar, s.lastExplicit
	s.plainOwner, s.lastScalar, s.lastExplicit = noPlain, -1, false
	if scalar >= 0 {
		if s.src[s.i] == ':' && s.blankAt(s.i+1) {
			if explicit {
				s.openBlock(scalar, false)
			} else {
				s.pushBlock(scalar, false)
			}
			s.delim = scalar
			s.i++
			s.node()
			return
		}
		s.emptyEntry = -1 // kept for a scalar that became a key
	}
	if owner != noPlain {
		switch {
		case indent <= owner:
		case s.src[s.i] == '-' && owner >= 0:
			// Inside a collection, the parser reads a continuation line
			// that starts with "-", and every line after it indented as
			// much, as text.
			s.literal, s.literalParent, s.literalIndent, s.literalFirst = true, owner, indent, -1
			s.literalBlank, s.literalCol = false, scalar
			s.i++
			s.skipSpaces()
			if s.atLineEnd() {
				// Until text follows, the line's own indentation does
				// not count yet.
				s.literalIndent, s.literalFirst = -1, indent
			}
			s.skipLine()
			return
		default:
			s.lastExplicit = explicit
			if s.plainText(owner, scalar) {
				at := s.keyAt(scalar)
				s.openBlock(at, false)
				s.delim = at
				s.i++
				s.node()
			}
			return
		}
	}
	if indent == 0 && s.src[s.i] == '%' {
		s.skipLine() // a directive
		return
	}
	s.node()
}

// documentMarker reports whether the line starts with "---" and a blank,
// or (to the parser's scanner) with "..." and anything but a fourth dot;
// inside a block scalar, with "..." and a blank.
func (s *nestScanner) documentMarker(literal bool) bool {
	if s.i+3 > len(s.src) {
		return false
	}
	switch string(s.src[s.i : s.i+3]) {
	case "---":
		return s.blankAt(s.i + 3)
	case "...":
		return s.blankAt(s.i+3) || !literal && s.src[s.i+3] != '.'
	}
	return false
}

// node reads the rest of a line in block context from the start of a
// node. One line may hold several: "- - key: [value]".
func (s *nestScanner) node() {
	glued := s.glued
	s.glued = false
	dash := -1 // the column of a list entry's "-" just read
	// explicit is the column of a "?" just read: the parser takes a ':'
	// after the key that follows, here or on the next line, as that
	// mapping's, not a new one's.
	explicit := s.explicitNext
	s.explicitNext = -1
	first := true // at the line's first node
	for ; !s.over(); first = false {
		afterDash := dash
		dash = -1
		s.skipSpaces()
		if s.atLineEnd() {
			if afterDash >= 0 {
				s.emptyEntry = afterDash
			}
			s.explicitNext = explicit
			s.newLine()
			return
		}
		col := s.i - s.lineStart
		keyCol := col
		s.lastExplicit = explicit >= 0
		if explicit >= 0 {
			keyCol, explicit = explicit, -1
		}
		if glued && first && s.src[s.i] != '#' {
			// The line starts a plain scalar, whatever its first
			// character (see glued).
			if !s.plain(keyCol) {
				s.dangling = false
				return
			}
			if s.merge > col {
				keyCol, col = s.merge, s.merge
			}
			s.merge = -1
			s.openBlock(keyCol, false)
			s.delim = col
			s.i++
			continue
		}
		props, tag := false, false // tag: the props dangle at a line's end
		for s.anchorName || s.src[s.i] == '&' || s.src[s.i] == '!' || s.src[s.i] == '*' && s.blankAt(s.i+1) {
			// An anchor or a tag (or an alias without a name, which the
			// parser takes from the next scalar); a key keeps the column
			// they start at.
			isTag := s.src[s.i] == '!'
			nameless := s.anchorName
			if !nameless {
				tag = tag || s.src[s.i] != '&'
				if s.src[s.i] == '&' && s.blankAt(s.i+1) {
					// An anchor without a name takes the next token as
					// one, on this line or the next.
					s.i++
					s.skipSpaces()
					s.anchorName = s.atLineEnd()
					nameless = !s.anchorName
				}
			}
			if nameless {
				// The name is the next token (a whole plain scalar, if
				// that is what comes), and the node after it the anchor's
				// value, nested where the anchor is.
				s.anchorName, s.dangling, tag = false, true, true
				if c := s.src[s.i]; c != '!' && c != '&' && c != '*' {
					for !s.atLineEnd() && !(s.src[s.i] == '#' && isSpace(s.src[s.i-1])) && !(s.src[s.i] == ':' && s.blankAt(s.i+1)) {
						s.i++
					}
				}
			}
			for !s.nameEnd(isTag) {
				s.i++
			}
			s.skipSpaces()
			if s.atLineEnd() {
				if afterDash >= 0 {
					s.emptyEntry = afterDash
				}
				s.dangling = tag || first
				s.newLine()
				return
			}
			props = true
		}
		switch c := s.src[s.i]; {
		case c == '-' && s.entryAt(s.i+1),
			!props && c == ':' && s.blankAt(s.i+1),
			c == '?' && s.i+1 < len(s.src) && isSpace(s.src[s.i+1]):
			// A list entry, an explicit key or an explicit key's value: a
			// node may follow on the same line. (A "?" alone is a plain
			// scalar to the parser.)
			s.openBlock(s.i-s.lineStart, c == '-')
			if c != ':' {
				s.delim = s.i - s.lineStart
			}
			s.i++
			if c == '-' {
				dash = s.i - 1 - s.lineStart
			}
			if c == '?' {
				explicit = col
			}
			continue
		case c == '#':
			if afterDash >= 0 {
				s.emptyEntry = afterDash
			}
			if s.lastExplicit {
				s.explicitNext = keyCol
			}
			if props {
				s.dangling = tag || first
			}
			s.skipLine()
			return
		}
		// The parser's scanner takes the column of a quoted key, after
		// any anchor or tag, as its delimiters' (see delim); not that of
		// an alias or a flow collection.
		own, delim := s.i-s.lineStart, false
		switch c := s.src[s.i]; {
		case c == '[' || c == '{':
			s.flowCollection()
		case c == '"' || c == '\'':
			s.quoted()
			delim = true
		case c == '|' || c == '>':
			s.blockScalar(keyCol, s.i-s.lineStart)
			s.emptyEntry, s.dangling = -1, false
			return
		case c == '*':
			for !s.nameEnd(false) {
				s.i++
			}
		default:
			if !s.plain(keyCol) {
				s.dangling = false
				return
			}
			// The parser's scanner takes a plain key's column from
			// where its node began, anchor or tag included.
			at := col
			if s.merge > own && !s.lastExplicit && !props {
				// A merge key after other text (see mergeKey).
				keyCol, at = s.merge, s.merge
			}
			s.merge = -1
			s.openBlock(keyCol, false)
			s.delim = at
			s.i++
			continue
		}
		if s.over() {
			return
		}
		// After a node: a ':' makes it a key.
		s.skipSpaces()
		if !s.atLineEnd() && s.src[s.i] == ':' && s.blankAt(s.i+1) {
			s.openBlock(keyCol, false)
			if delim {
				s.delim = own
			}
			s.i++
			continue
		}
		s.dangling = false
		switch {
		case s.atLineEnd():
			s.lastScalar = keyCol
			s.newLine()
			return
		case s.src[s.i] == '#':
			s.emptyEntry = -1
			s.skipLine()
			return
		}
		// Anything else is read as another node: nothing the parser
		// might see as structure goes uncounted.
		s.emptyEntry = -1
	}
}

// nameEnd reports whether s.i ends the name of a tag (when tag is set), an
// anchor or an alias. To the parser's scanner only a space or a line break
// ends one, not a tab; but a '#' after a tab starts a comment, except in
// a tag.
func (s *nestScanner) nameEnd(tag bool) bool {
	return s.atLineEnd() || s.src[s.i] == ' ' || !tag && s.src[s.i] == '#' && s.src[s.i-1] == '\t'
}

// openBlock notes an entry of a block collection whose entries are at col:
// a new collection, unless it continues the one open there.
func (s *nestScanner) openBlock(col int, seq bool) {
	if s.dangling {
		s.pushBlock(col, seq)
		return
	}
	for len(s.block) > 0 && s.block[len(s.block)-1].col > col {
		s.block = s.block[:len(s.block)-1]
	}
	if n := len(s.block); n > 0 && s.block[n-1].col == col {
		switch top := s.block[n-1]; {
		case top.seq == seq:
			s.emptyEntry = -1
			return
		case !top.seq:
			// A list may be written at its key's indentation.
		case s.emptyEntry == col:
			// A key under an empty entry (see emptyEntry).
		default:
			// A key after such a list goes back to its mapping.
			s.block = s.block[:n-1]
			if n > 1 && s.block[n-2].col == col && !s.block[n-2].seq {
				return
			}
		}
	}
	s.pushBlock(col, seq)
}

// pushBlock opens a block collection inside the innermost one.
func (s *nestScanner) pushBlock(col int, seq bool) {
	s.dangling, s.emptyEntry = false, -1
	s.block = append(s.block, blockLevel{col: col, seq: seq})
	s.reach()
}

// plain reads a plain scalar in block context that began at col. It
// stops before a ':' that makes it a key (and reports true), or consumes
// the line.
func (s *nestScanner) plain(col int) (key bool) {
	for ; !s.atLineEnd(); s.i++ {
		switch c := s.src[s.i]; {
		case c == ':' && s.blankAt(s.i+1), c == '<' && s.mergeKey():
			return true
		case c == '#' && isSpace(s.src[s.i-1]):
			s.emptyEntry = -1
			s.skipLine()
			return false
		}
	}
	s.plainOwner, s.lastScalar = s.delim, col
	s.newLine()
	return false
}

// mergeKey reports whether a merge key ("<<", spaces, ':' and a space or
// a line break) starts at s.i, and if so moves to its ':' and notes its
// column in merge. The parser's scanner reads one anywhere in a plain
// scalar, as a key at that column; the text before it is dropped.
func (s *nestScanner) mergeKey() bool {
	j := s.i + 2
	if j > len(s.src) || s.src[s.i+1] != '<' || j < len(s.src) && s.src[j] == '<' {
		return false
	}
	for j < len(s.src) && s.src[j] == ' ' {
		j++
	}
	if j+1 >= len(s.src) || s.src[j] != ':' || s.src[j+1] != ' ' && !isBreak(s.src[j+1]) {
		return false
	}
	s.merge = s.i - s.lineStart
	s.i = j
	return true
}

// keyAt is the column of a key that began at col: a merge key's own.
func (s *nestScanner) keyAt(col int) int {
	if s.merge >= 0 {
		col, s.merge = s.merge, -1
	}
	return col
}

// plainText reads a line that continues a plain scalar: text up to a
// comment or the end of the line, where the scalar may go on, or up to a
// ':' that makes the scalar a key (reported true).
func (s *nestScanner) plainText(owner, col int) (key bool) {
	for ; !s.atLineEnd(); s.i++ {
		switch c := s.src[s.i]; {
		case c == ':' && s.blankAt(s.i+1), c == '<' && s.mergeKey():
			return true
		case c == '#' && isSpace(s.src[s.i-1]):
			s.skipLine()
			return false
		}
	}
	s.plainOwner, s.lastScalar = owner, col
	s.newLine()
	return false
}

// blockScalar reads the header of a block scalar whose node began at col
// and whose indicator is at column header (the rest of the line: an
// indentation digit, a chomping sign, a comment) and consumes the line;
// its content is the lines that follow. The parser refuses a malformed
// header before it parses anything.
func (s *nestScanner) blockScalar(col, header int) {
	s.i++
	start := s.i
	for !s.atLineEnd() {
		s.i++
	}
	opt := s.src[start:s.i]
	if i := bytes.IndexByte(opt, '#'); i > 0 {
		opt = opt[:i]
	}
	opt = bytes.TrimRight(opt, " \t")
	opt = bytes.TrimPrefix(bytes.TrimPrefix(opt, []byte("-")), []byte("+"))
	opt = bytes.TrimSuffix(bytes.TrimSuffix(opt, []byte("-")), []byte("+"))
	if header == 0 {
		// A header that is not indented makes the content end at a line
		// that is not indented either.
		s.delim = 0
	}
	s.literal, s.literalParent, s.literalIndent, s.literalFirst, s.literalBlank = true, s.delim, -1, -1, false
	s.literalCol = col
	if len(opt) == 1 && opt[0] >= '1' && opt[0] <= '9' {
		s.literalIndent = s.literalParent + int(opt[0]-'0')
	}
	s.newLine()
}
