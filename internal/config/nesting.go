package config

import (
	"fmt"
	"unicode/utf8"
)

// MaxNesting bounds how deeply a document's collections (mappings and
// lists, in YAML or JSON) may nest. No real document needs more than about
// ten levels. The bound is there because the YAML parser's memory grows
// with the square of the depth: 20 KB nested 10,000 deep cost 188 MB,
// 100,000 deep several gigabytes.
const MaxNesting = 64

// CheckNesting refuses a YAML or JSON document whose collections nest
// deeper than MaxNesting, naming the line where the bound is crossed. It
// reads the bytes once and keeps at most MaxNesting+1 levels, so it runs
// before any parser builds anything: Load, Parse and ParseProxy call it,
// and so does every reader of a body that encoding/json would see first.
func CheckNesting(src []byte) error {
	if depth, at := nestingDepth(src, MaxNesting); depth > MaxNesting {
		return invalid(Violation{
			Message: fmt.Sprintf("nested deeper than %d levels, the bound on a document's nesting", MaxNesting),
			Line:    lineAt(src, at),
		})
	}
	return nil
}

// nestingDepth is how many collections enclose the deepest point of src,
// as goccy/go-yaml's parser would build them, and the offset where that
// depth is first reached. It stops as soon as the depth passes limit.
func nestingDepth(src []byte, limit int) (depth, at int) {
	s := nestScanner{src: src, limit: limit, plainOwner: noPlain, lastScalar: -1, explicitNext: -1, delim: -1, emptyEntry: -1, merge: -1}
	for s.i < len(s.src) && !s.over() {
		s.line()
	}
	return s.max, s.at
}

// lineAt is the 1-based line of offset in src.
func lineAt(src []byte, offset int) int {
	line := 1
	for i := 0; i < offset && i < len(src); i++ {
		if src[i] == '\n' || (src[i] == '\r' && (i+1 >= len(src) || src[i+1] != '\n')) {
			line++
		}
	}
	return line
}

// noPlain is plainOwner when no plain scalar is open.
const noPlain = -2

// nestScanner follows the structure that YAML's indicators and indentation
// give a document without building any of it. Block collections are told
// apart by the column of their entries; flow collections by their
// brackets. Everything whose content is free text is skipped as text:
// quoted scalars (a single quote is escaped by doubling it, a double one
// by a backslash), comments (a # at the start of a line or after a space),
// block scalars (| and >, up to the first line indented less than their
// content), plain scalars and their continuation lines.
type nestScanner struct {
	src       []byte
	i         int // the next byte to read
	lineStart int // the offset of the current line's first byte
	limit     int
	max, at   int // the deepest point so far, and where it was first reached

	block     []blockLevel // open block collections, innermost last
	flow      []flowLevel  // open flow collections, innermost last
	flowDepth int          // the levels the open flow collections add

	// delim is the column of the last "-", "?" or key, or -1: the
	// parser's scanner ends a plain or block scalar at a line indented
	// no further. It is the innermost block collection's column, but for
	// keys that are aliases (which leave it as it was) and block scalars.
	delim int
	// merge is the column of a merge key plain or plainText just found,
	// or -1 (see mergeKey).
	merge int
	// plainOwner is, while the last line ended inside a plain scalar, the
	// column a line must be indented past to continue it; noPlain when
	// none.
	plainOwner int
	// lastScalar is the column where a scalar that ended the last line
	// (with the anchor or tag before it) began, or -1: a ':' on the next
	// line, at its start or on a continuation line, makes it a key there.
	// At the start, the parser nests the mapping that makes where it
	// stands, unless the scalar followed a "?" (lastExplicit).
	lastScalar   int
	lastExplicit bool
	// explicitNext is the column of a "?" that ended the last line, or -1.
	explicitNext int
	// literal is set inside a block scalar: a line that is blank or
	// indented at least literalIndent is its content. Until the first
	// line of content (indented past literalParent) sets it, to its own
	// indentation or to literalFirst when that is not -1, literalIndent
	// is -1.
	literal                                    bool
	literalParent, literalIndent, literalFirst int
	// glued is set when a block scalar ended with blank lines and no
	// content: the parser then reads the next line as starting a plain
	// scalar, whatever its first character.
	literalBlank, glued bool
	literalCol          int // where the block scalar began
	// emptyEntry is the column of a list entry with nothing after its "-"
	// on the line, or -1. The parser reads a key on the next line at that
	// column as a mapping inside the entry, not beside the list.
	emptyEntry int
	// dangling is set after a tag (or an alias without a name) that ends
	// a line, or an anchor alone on its line: the parser makes the next
	// node their content, nested where they are whatever its
	// indentation.
	dangling bool
	// anchorName is set after an anchor without a name that ended a
	// line: the next token is its name.
	anchorName bool
}

type blockLevel struct {
	col int  // the column of the collection's entries
	seq bool // a list ("- "), not a mapping
}

// flowLevel is one open [ or {. An entry of a flow collection may open
// levels of its own without brackets, which last until the entry ends at
// a comma or the closing bracket: "a: b" inside a list is a mapping of one
// pair, and the parser reads "- a" inside brackets as a list.
type flowLevel struct {
	seq   bool // [ rather than {
	extra int  // the levels the current entry opened
	pair  bool // the innermost level of the current entry is a pair already
	own   bool // a mapping's current entry has had its own ':'
}

func (s *nestScanner) over() bool { return s.max > s.limit }

// reach notes the current depth.
func (s *nestScanner) reach() {
	if d := len(s.block) + s.flowDepth; d > s.max {
		s.max, s.at = d, s.i
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }
func isBreak(c byte) bool { return c == '\n' || c == '\r' }

// blankAt reports whether offset i ends a token: a space, a line break or
// the end of the document.
func (s *nestScanner) blankAt(i int) bool {
	return i >= len(s.src) || isSpace(s.src[i]) || isBreak(s.src[i])
}

// entryAt reports whether a "-" at offset i-1 is a list entry: followed
// by a blank or, to the parser, a NUL.
func (s *nestScanner) entryAt(i int) bool {
	return s.blankAt(i) || s.src[i] == 0
}

func (s *nestScanner) atLineEnd() bool { return s.i >= len(s.src) || isBreak(s.src[s.i]) }

// newLine consumes the line break at s.i (\n, \r\n or \r), if any.
func (s *nestScanner) newLine() {
	if s.i < len(s.src) && s.src[s.i] == '\r' {
		s.i++
	}
	if s.i < len(s.src) && s.src[s.i] == '\n' {
		s.i++
	}
	s.lineStart = s.i
}

// skipLine consumes the rest of the line and its break.
func (s *nestScanner) skipLine() {
	for !s.atLineEnd() {
		s.i++
	}
	s.newLine()
}

func (s *nestScanner) skipSpaces() {
	for s.i < len(s.src) && isSpace(s.src[s.i]) {
		s.i++
	}
}

// runesAfter reports whether n characters are left from s.i.
func (s *nestScanner) runesAfter(n int) bool {
	return utf8.RuneCount(s.src[s.i:min(len(s.src), s.i+n*utf8.UTFMax)]) >= n
}

// skipRunes skips n characters (an invalid byte is one, as the parser's
// scanner reads it).
func (s *nestScanner) skipRunes(n int) {
	for ; n > 0 && s.i < len(s.src); n-- {
		_, size := utf8.DecodeRune(s.src[s.i:])
		s.i += size
	}
}

// quoted skips a quoted scalar, which may span lines.
func (s *nestScanner) quoted() {
	q := s.src[s.i]
	s.i++
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == '\\' && q == '"':
			s.i++
			switch {
			case s.i >= len(s.src):
			case isBreak(s.src[s.i]):
				s.newLine()
			case s.src[s.i] == 'x' && s.runesAfter(3):
				// The parser takes the characters after \x, \u and \U
				// as their digits, whatever they are.
				s.skipRunes(3)
			case s.src[s.i] == 'u':
				s.skipRunes(5)
			case s.src[s.i] == 'U':
				s.skipRunes(9)
			default:
				s.i++
			}
		case c == q:
			s.i++
			if q == '"' || s.i >= len(s.src) || s.src[s.i] != '\'' {
				return
			}
			s.i++ // '' is a quote inside single quotes
		case isBreak(c):
			s.newLine()
		default:
			s.i++
		}
	}
}
