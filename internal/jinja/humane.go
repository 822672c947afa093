package jinja

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Rendering errors are said in the user's words: where (line, column, and
// the tag that failed, quoted from the template) and why, in one line —
// never gonja's names for its own structures (IfControlStructure(Line=1
// Col=7), filtered_expression(…), call([…], map[])).

var (
	atLineCol   = regexp.MustCompile(`Line=(\d+) Col=(\d+)`)
	atLine      = regexp.MustCompile(`at line (\d+)`)
	engineNoise = []*regexp.Regexp{
		regexp.MustCompile(`(?i)unable to execute template: `),
		regexp.MustCompile(`Unable to execute controlStructure at line \d+: `),
		regexp.MustCompile(`\w+ControlStructure\(Line=\d+ Col=\d+\): `),
		regexp.MustCompile(`Unable to render expression at line \d+: `),
		regexp.MustCompile(`Unable to evaluate target [^:]*: `),
	}
	filterToken = regexp.MustCompile(`unable to evaluate filter &\{<Token\[\w+\] Val='(\w+)'[^}]*\}`)
)

// humane rewrites a rendering error message from gonja for source, with
// where it happened read from raw, gonja's own message (msg may have lost
// the positions of the filters the bounds insert).
func humane(raw, msg, source string) string {
	line, col := 0, 0
	if m := atLineCol.FindStringSubmatch(raw); m != nil {
		line, _ = strconv.Atoi(m[1])
		col, _ = strconv.Atoi(m[2])
	} else if m := atLine.FindStringSubmatch(raw); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	for _, re := range engineNoise {
		msg = re.ReplaceAllString(msg, "")
	}
	msg = filterToken.ReplaceAllString(msg, "filter `$1`")
	msg = dropCalls(msg, "filtered_expression(")
	msg = dropCalls(msg, "call(")
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), ":"))
	where := ""
	switch {
	case line > 0 && col > 0:
		where = "line " + strconv.Itoa(line) + ", column " + strconv.Itoa(col)
	case line > 0:
		where = "line " + strconv.Itoa(line)
	}
	if tag := tagAt(source, line, col); tag != "" {
		where += ", in " + tag
		// gonja echoes the expression before its cause: the tag says it.
		msg = strings.TrimPrefix(msg, strings.TrimSpace(tag[3:len(tag)-3])+": ")
	}
	if r, size := utf8.DecodeRuneInString(msg); size > 0 && r != utf8.RuneError {
		msg = string(unicode.ToLower(r)) + msg[size:]
	}
	if where == "" {
		return msg
	}
	return where + ": " + msg
}

// dropCalls removes gonja's echoes of an expression, `name(…)` with
// nested parentheses, and the ": " after each.
func dropCalls(msg, name string) string {
	for {
		i := strings.Index(msg, name)
		if i < 0 {
			return msg
		}
		depth, j := 0, i+len(name)-1
		for ; j < len(msg); j++ {
			if msg[j] == '(' {
				depth++
			} else if msg[j] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j >= len(msg) {
			return msg
		}
		end := j + 1
		end += len(msg[end:]) - len(strings.TrimPrefix(msg[end:], ": "))
		msg = msg[:i] + msg[end:]
	}
}

// maxTag bounds the tag quoted in a message.
const maxTag = 120

// tagAt is the `{{ … }}` or `{% … %}` of source at line and column (1-based;
// column 0 when unknown: the line's only tag), or "" when it cannot tell.
func tagAt(source string, line, col int) string {
	if line <= 0 {
		return ""
	}
	lines := strings.SplitN(source, "\n", line+1)
	if len(lines) < line {
		return ""
	}
	text := lines[line-1]
	var tags [][2]int
	for i := 0; i+1 < len(text); i++ {
		if text[i] == '{' && (text[i+1] == '{' || text[i+1] == '%') {
			closer := "}}"
			if text[i+1] == '%' {
				closer = "%}"
			}
			if j := strings.Index(text[i+2:], closer); j >= 0 {
				tags = append(tags, [2]int{i, i + 2 + j + 2})
				i += 2 + j + 1
			}
		}
	}
	pick := -1
	switch {
	case col > 0:
		for k, t := range tags {
			if col-1 >= t[0] && col-1 < t[1] {
				pick = k
			}
		}
	case len(tags) == 1:
		pick = 0
	}
	if pick < 0 {
		return ""
	}
	tag := text[tags[pick][0]:tags[pick][1]]
	if len(tag) > maxTag {
		return ""
	}
	return "`" + tag + "`"
}

// unknownNames reports the first filter or test the template calls that the
// environment does not have: gonja finds out only when rendering.
func unknownNames(t *Template) error {
	var err error
	check := func(kind, name string, at *tokens.Token, known bool) {
		if err == nil && !known && !strings.HasPrefix(name, "_doppel_") {
			err = fmt.Errorf("line %d, column %d: there is no %s `%s`", at.Line, at.Col, kind, name)
		}
	}
	visit(reflect.ValueOf(t.t.Root()), map[uintptr]bool{}, func(p reflect.Value) bool {
		switch x := p.Interface().(type) {
		case *nodes.FilterCall:
			check("filter", x.Name, x.Token, Environment.Filters.Exists(x.Name))
		case *nodes.TestCall:
			check("test", x.Name, x.Token, Environment.Tests.Exists(x.Name))
		}
		return true
	})
	return err
}
