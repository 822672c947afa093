package config

// Value types. Each refuses bad input while the document is read, with a
// message that says why, and keeps what is expensive to derive (a compiled
// pattern, a parsed URL) so that no later code parses again. Each writes
// itself back in canonical form.

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// checkName checks the length before the characters, in characters, as
// 1.1 does, so that one name gets the same verdict from both.
func checkName(s string, max int) error {
	switch n := utf8.RuneCountInString(s); {
	case n < 2:
		return fmt.Errorf("%s is %d characters long: a name must be at least 2 characters (2 to %d)", quote(s), n, max)
	case n > max:
		return fmt.Errorf("%s is %d characters long: a name must be at most %d characters (2 to %d)", quote(s), n, max, max)
	}
	if !namePattern.MatchString(s) {
		msg := fmt.Sprintf("%s is not a valid name: use letters, digits, `-` and `_`", quote(s))
		if strings.Contains(s, ".") {
			msg += fmt.Sprintf("; a name may no longer contain `.` (write %s, or use `_`)", strings.ReplaceAll(s, ".", "-"))
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// Name names a mock, a token or a group: 2..64 of letters, digits, `-`, `_`.
type Name string

func (v *Name) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a name")
	if err != nil {
		return err
	}
	if err := checkName(s, 64); err != nil {
		return refuse(n, "%v", err)
	}
	*v = Name(s)
	return nil
}

// ParseName checks a name given outside a document (a CLI flag, an
// environment variable).
func ParseName(s string) (Name, error) {
	if err := checkName(s, 64); err != nil {
		return "", err
	}
	return Name(s), nil
}

// ProxyName is a Name capped at 32 characters: it becomes a directory, a
// metric label, a log field and a resolution header value.
type ProxyName string

func (v *ProxyName) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a proxy name")
	if err != nil {
		return err
	}
	if err := checkName(s, 32); err != nil {
		return refuse(n, "%v", err)
	}
	*v = ProxyName(s)
	return nil
}

// Host is an IP literal; a hostname is refused because which address it
// resolves to is not the configuration's to decide.
type Host struct{ netip.Addr }

func (v *Host) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "an IP address")
	if err != nil {
		return err
	}
	a, perr := netip.ParseAddr(s)
	if perr != nil {
		return refuse(n, "%s is not an IP address (a hostname is not accepted: write 127.0.0.1, 0.0.0.0 or ::)", quote(s))
	}
	v.Addr = a
	return nil
}

func (v Host) MarshalYAML() (any, error) { return v.String(), nil }

// IsWildcard reports a bind to every interface (0.0.0.0 or ::).
func (v Host) IsWildcard() bool { return v.IsValid() && v.IsUnspecified() }

// Port is a TCP port, 1..65535.
type Port uint16

func (v *Port) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a port number")
	if err != nil {
		return err
	}
	switch {
	case i == 0:
		return refuse(n, "port 0 asks the operating system for any free port, so nobody could know where Doppel listens; choose a port from 1 to 65535")
	case i < 0 || i > 65535:
		return refuse(n, "%d is not a port: ports are 1 to 65535", i)
	}
	*v = Port(i)
	return nil
}

// Ratio is a share written as a fraction, 0.0..1.0.
type Ratio float64

func (v *Ratio) UnmarshalYAML(n ast.Node) error {
	f, err := numberValue(n, "a fraction from 0.0 to 1.0")
	if err != nil {
		return err
	}
	r, perr := ParseRatio(f)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = r
	return nil
}

// ParseRatio checks a fraction given outside YAML.
func ParseRatio(f float64) (Ratio, error) {
	switch {
	case f > 1 && f <= 100:
		msg := fmt.Sprintf("%s is not between 0.0 and 1.0: shares are fractions, so 50%% is `0.5`", fmtFloat(f))
		if f != 50 {
			msg += fmt.Sprintf(" and %s%% is %s", fmtFloat(f), fmtFloat(f/100))
		}
		return 0, fmt.Errorf("%s", msg)
	case f < 0 || f > 1 || math.IsNaN(f):
		return 0, fmt.Errorf("%s is not between 0.0 and 1.0: shares are fractions, so 50%% is `0.5`", fmtFloat(f))
	}
	return Ratio(f), nil
}

func (v Ratio) MarshalYAML() (any, error) { return float64(v), nil }

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Seconds is a latency bound, 0..300, fractions allowed.
type Seconds float64

const maxSeconds = 300

func (v *Seconds) UnmarshalYAML(n ast.Node) error {
	f, err := numberValue(n, "a number of seconds")
	if err != nil {
		return err
	}
	switch {
	case f < 0:
		return refuse(n, "a latency must not be negative, and %s is: seconds are 0 to %d", fmtFloat(f), maxSeconds)
	case f > maxSeconds:
		msg := fmt.Sprintf("%s seconds is over the %d-second maximum", fmtFloat(f), maxSeconds)
		if f >= 1000 {
			msg += fmt.Sprintf("; it looks like milliseconds: write %s", fmtFloat(f/1000))
		} else {
			msg += "; a latency is in seconds, not milliseconds"
		}
		return refuse(n, "%s", msg)
	}
	*v = Seconds(f)
	return nil
}

func (v Seconds) MarshalYAML() (any, error) { return float64(v), nil }

// Timeout bounds a whole upstream exchange: whole seconds, 1..3600.
type Timeout uint16

// DefaultTimeout is a proxy's timeout when it declares none.
const DefaultTimeout Timeout = 30

func (v *Timeout) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a whole number of seconds")
	if err != nil {
		return err
	}
	switch {
	case i == 0:
		return refuse(n, "a timeout of 0 would mean no timeout at all, so it is refused; leave `timeout` out for the default of %d seconds", DefaultTimeout)
	case i < 0:
		return refuse(n, "a timeout must not be negative, and %d is: timeout is 1 to 3600 whole seconds", i)
	case i > 3600:
		msg := fmt.Sprintf("%d seconds is over the 3600-second maximum; timeout is in seconds, not milliseconds", i)
		if i >= 1000 {
			msg += fmt.Sprintf(", so it looks like milliseconds: write %s", fmtFloat(float64(i)/1000))
		}
		return refuse(n, "%s", msg)
	}
	*v = Timeout(i)
	return nil
}

// ByteSize is a byte count, 1 byte..1 GiB, written back as an integer.
type ByteSize int64

// DefaultByteSize is body_limit's and upload.limit's default: 1 MiB.
const DefaultByteSize ByteSize = 1 << 20

const maxByteSize = 1 << 30

var sizePattern = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
}

func (v *ByteSize) UnmarshalYAML(n ast.Node) error {
	if _, ok := unwrap(n).(*ast.IntegerNode); ok {
		i, err := integerValue(n, "a byte size")
		if err != nil {
			return err
		}
		b, perr := checkSize(i, strconv.FormatInt(i, 10))
		if perr != nil {
			return refuse(n, "%v", perr)
		}
		*v = b
		return nil
	}
	s, err := stringValue(n, "a byte size such as 1048576, 1Mi or 1MB")
	if err != nil {
		return err
	}
	b, perr := ParseByteSize(s)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = b
	return nil
}

// ParseByteSize reads `1048576`, `4096B`, `1Mi`, `1MiB`, `1MB` (any case).
func ParseByteSize(s string) (ByteSize, error) {
	n, err := ParseBytes(s)
	if err != nil {
		return 0, err
	}
	return checkSize(n, strings.TrimSpace(s))
}

// ParseBytes reads how a byte size is spelled, with the bounds left to the
// caller: a body size, the journal's bodies and the rendering budget each
// have their own.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	m := sizePattern.FindStringSubmatch(t)
	if m == nil {
		return 0, fmt.Errorf("%s is not a byte size: write a whole number of bytes, or one with Ki, Mi, Gi (1024-based) or kB, MB, GB (1000-based)", quote(s))
	}
	unit := strings.ToLower(m[2])
	if unit == "k" || unit == "m" || unit == "g" {
		// The decimal kilo is lower case (kB), as the units table spells it.
		bin, dec := strings.ToUpper(unit), strings.ToUpper(unit)
		if unit == "k" {
			dec = "k"
		}
		return 0, fmt.Errorf("%s: write %s%si or %s%sB (a bare %s is ambiguous: %si is 1024-based, %sB is 1000-based)",
			t, m[1], bin, m[1], dec, m[2], bin, dec)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%s has an unknown unit %s: use B, Ki, Mi, Gi, KiB, MiB, GiB, kB, MB or GB", quote(s), quote(m[2]))
	}
	num, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || num > math.MaxInt64/mult {
		return 0, fmt.Errorf("%s is too large a size: it would overflow a byte count", t)
	}
	return num * mult, nil
}

func checkSize(b int64, spelled string) (ByteSize, error) {
	switch {
	case b < 0:
		return 0, fmt.Errorf("a size must not be negative, and %s is: sizes are 1 byte to 1 GiB", spelled)
	case b == 0:
		return 0, fmt.Errorf("a size of %s would reject everything, every body included; sizes are 1 byte to 1 GiB", spelled)
	case b > maxByteSize:
		return 0, fmt.Errorf("%s is over the 1 GiB maximum", spelled)
	}
	return ByteSize(b), nil
}

func (v ByteSize) MarshalYAML() (any, error) { return int64(v), nil }

// HeaderName is an RFC 9110 token, case kept as written.
type HeaderName string

func (v *HeaderName) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a header name")
	if err != nil {
		return err
	}
	if err := CheckHeaderName(s); err != nil {
		return refuse(n, "%v", err)
	}
	*v = HeaderName(s)
	return nil
}

// CheckHeaderName refuses anything but a non-empty RFC 9110 token.
func CheckHeaderName(s string) error {
	if s == "" {
		return fmt.Errorf("a header name may not be empty")
	}
	for _, r := range s {
		if !isTokenChar(r) {
			return fmt.Errorf("%s is not a valid header name: %q is not allowed (letters, digits and !#$%%&'*+-.^_`|~ only)", quote(s), r)
		}
	}
	return nil
}

func isTokenChar(r rune) bool {
	return r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// HeaderValue is visible ASCII plus space and tab; a line break would end
// the header early and let the rest be read as headers of its own.
type HeaderValue string

func (v *HeaderValue) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a header value")
	if err != nil {
		return err
	}
	if err := CheckHeaderValue(s); err != nil {
		return refuse(n, "%v", err)
	}
	*v = HeaderValue(s)
	return nil
}

// CheckHeaderValue refuses anything but visible ASCII, space and tab; the
// values mock templates render are held to it too.
func CheckHeaderValue(s string) error {
	for _, r := range s {
		switch {
		case r == '\r' || r == '\n':
			return fmt.Errorf("a header value may not contain a line break: it would end the header early, and the rest would be read as headers of their own")
		case r != ' ' && r != '\t' && (r < 0x21 || r > 0x7e):
			return fmt.Errorf("a header value may contain only visible ASCII, space and tab, not %q", r)
		}
	}
	return nil
}

// Token is an admin token: printable ASCII without spaces, 32..255 characters.
type Token string

func (v *Token) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a token")
	if err != nil {
		return err
	}
	t, perr := ParseToken(s)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = t
	return nil
}

// ParseToken checks a token given outside a document. Its messages never
// include the value: a token is a secret.
func ParseToken(s string) (Token, error) {
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("a token may contain only printable ASCII without spaces")
		}
	}
	switch {
	case len(s) < 32:
		return "", fmt.Errorf("a token must be at least 32 characters, this one is %d (32 to 255; a UUID v4 is the recommended shape)", len(s))
	case len(s) > 255:
		return "", fmt.Errorf("a token must be at most 255 characters, this one is %d (32 to 255; a UUID v4 is the recommended shape)", len(s))
	}
	return Token(s), nil
}

// Methods is the list a mock's method must come from: a typo guard, not a
// protocol restriction.
var Methods = []string{
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "QUERY",
	"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK",
}

// Method is an upper-case HTTP method from Methods.
type Method string

func (v *Method) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "an HTTP method")
	if err != nil {
		return err
	}
	if slices.Contains(Methods, s) {
		*v = Method(s)
		return nil
	}
	if up := strings.ToUpper(s); slices.Contains(Methods, up) {
		return refuse(n, "HTTP methods are case-sensitive: %s is not upper case, so use `%s`", quote(s), up)
	}
	return refuse(n, "%s is not a method Doppel knows; the list is a typo guard (to add it, report the method as missing): %s", quote(s), strings.Join(Methods, ", "))
}

// Status is the HTTP status of an answer Doppel gives itself (a mock's, a
// dropped request's): 100..599, as in Doppel 1.1. A 1xx status loads, though
// it cannot end an exchange; startup says what the client gets instead
// (informationalAdvice).
type Status uint16

func (v *Status) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "an HTTP status")
	if err != nil {
		return err
	}
	if i < 100 || i > 599 {
		return refuse(n, "%d is not an HTTP status: statuses are 100 to 599", i)
	}
	*v = Status(i)
	return nil
}

// Pattern is a mock's path regex, compiled once when the document is read.
type Pattern struct {
	re *regexp.Regexp
}

func (v *Pattern) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a regular expression")
	if err != nil {
		return err
	}
	p, perr := ParsePattern(s)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = p
	return nil
}

// ParsePattern compiles a mock pattern.
func ParsePattern(s string) (Pattern, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("%s is not a valid regex: %v", quote(s), err)
	}
	return Pattern{re: re}, nil
}

// Regexp is the compiled pattern (nil for the zero Pattern).
func (v Pattern) Regexp() *regexp.Regexp { return v.re }

// String is the pattern as written.
func (v Pattern) String() string {
	if v.re == nil {
		return ""
	}
	return v.re.String()
}

// Groups are the named capture groups, in order.
func (v Pattern) Groups() []string {
	if v.re == nil {
		return nil
	}
	var names []string
	for _, name := range v.re.SubexpNames() {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

func (v Pattern) MarshalYAML() (any, error) { return v.String(), nil }

// Selector addresses object keys: a leading dot, then dot-separated keys.
type Selector struct {
	keys []string
}

func (v *Selector) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a selector such as .content.items")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(s, ".") || len(s) < 2 {
		return refuse(n, "selector %s must start with `.`: write a leading dot then dot-separated keys, as in .content.items", quote(s))
	}
	keys := strings.Split(s[1:], ".")
	for _, k := range keys {
		if k == "" {
			return refuse(n, "%s has an empty key: write a leading dot then dot-separated keys, as in .content.items", quote(s))
		}
		if strings.ContainsAny(k, "[]") {
			return refuse(n, "%s uses indexing, which selectors do not support: a selector reaching an array yields the whole array", quote(s))
		}
	}
	v.keys = keys
	return nil
}

// Keys are the selector's keys, without the leading dot.
func (v Selector) Keys() []string { return v.keys }

func (v Selector) String() string { return "." + strings.Join(v.keys, ".") }

func (v Selector) MarshalYAML() (any, error) { return v.String(), nil }

// TemplateName is a template file name: one path component. The admin API's
// upload check is CheckTemplateName too, so the two can never disagree.
type TemplateName string

func (v *TemplateName) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a template file name")
	if err != nil {
		return err
	}
	if err := CheckTemplateName(s); err != nil {
		return refuse(n, "%v", err)
	}
	*v = TemplateName(s)
	return nil
}

// CheckTemplateName refuses a blank name, names over 200 bytes, a leading
// dot, separators, `..`, control characters, in 1.1's order so that one
// name gets the same verdict and reason from both. Names are refused, never
// normalised.
func CheckTemplateName(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("a template file name may not be empty or blank")
	case len(s) > 200:
		return fmt.Errorf("a template file name is at most 200 bytes, this one is %d", len(s))
	case !utf8.ValidString(s):
		return fmt.Errorf("a template file name must be valid UTF-8")
	case strings.HasPrefix(s, "."):
		return fmt.Errorf("%s must not start with a dot: hidden names, `.` and `..` are refused", quote(s))
	case strings.ContainsAny(s, `/\`):
		return fmt.Errorf("%s is not one path component: a template file name must not contain a path separator (/ or \\)", quote(s))
	case strings.Contains(s, ".."):
		return fmt.Errorf("%s must not contain `..`", quote(s))
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("a template file name may not contain control characters")
		}
	}
	return nil
}

// UpstreamURL is a proxy's absolute http(s) base, without query or fragment,
// kept parsed so the forwarding path never parses it again.
type UpstreamURL struct {
	u *url.URL
}

func (v *UpstreamURL) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "an absolute http or https URL")
	if err != nil {
		return err
	}
	u, perr := ParseUpstreamURL(s)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = u
	return nil
}

// ParseUpstreamURL checks and normalises an upstream base
// (`https://H` becomes `https://h/`).
func ParseUpstreamURL(s string) (UpstreamURL, error) {
	u, err := parseHTTPURL(s)
	if err != nil {
		return UpstreamURL{}, err
	}
	return UpstreamURL{u: u}, nil
}

func parseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	// Messages name the URL without its password.
	s := redactUserinfo(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is not a URL: %v", quote(s), urlReason(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url must be absolute: %s is not an absolute http or https URL", quote(s))
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("%s has no host: write an absolute URL such as https://api.example.com/", quote(s))
	case !validPort(u.Port()):
		return nil, fmt.Errorf("%s has port %s: ports are 1 to 65535", quote(s), u.Port())
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("%s: a query string or fragment is not allowed here; this query would be discarded, as the forwarded request's own query replaces it", quote(s))
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%s: a query string or fragment is not allowed here; a fragment is never sent to a server", quote(s))
	}
	u.Host = strings.ToLower(u.Host)
	if u.Path == "" {
		u.Path = "/"
		u.RawPath = ""
	}
	return u, nil
}

// urlReason drops url.Error's repetition of the input (which would show a
// password).
func urlReason(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

var userinfo = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@`)

// redactUserinfo hides what stands before the @ of an authority, whether or
// not the rest of the URL parses.
func redactUserinfo(s string) string {
	return userinfo.ReplaceAllString(s, "${1}xxxxx@")
}

func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// URL is the parsed base. Callers must not modify it.
func (v UpstreamURL) URL() *url.URL { return v.u }

// HasCredentials reports a `user:pass@` in the URL.
func (v UpstreamURL) HasCredentials() bool { return v.u != nil && v.u.User != nil }

// Redacted is the URL without credentials, for status and logs.
func (v UpstreamURL) Redacted() string {
	if v.u == nil {
		return ""
	}
	c := *v.u
	c.User = nil
	return c.String()
}

func (v UpstreamURL) String() string {
	if v.u == nil {
		return ""
	}
	return v.u.String()
}

func (v UpstreamURL) MarshalYAML() (any, error) { return v.String(), nil }

// ExternalURL is where clients reach Doppel: an absolute http(s) URL, or a
// template over the system variables whose scheme is written literally.
type ExternalURL struct {
	raw string
	u   *url.URL // nil when the value is a template
}

func (v *ExternalURL) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "an absolute http or https URL")
	if err != nil {
		return err
	}
	e, perr := ParseExternalURL(s)
	if perr != nil {
		return refuse(n, "%v", perr)
	}
	*v = e
	return nil
}

// ParseExternalURL checks an external address (also DOPPEL_EXTERNAL_URL).
func ParseExternalURL(s string) (ExternalURL, error) {
	if strings.Contains(s, "{{") {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			return ExternalURL{}, fmt.Errorf("a templated external_url must start with a literal http:// or https://")
		}
		return ExternalURL{raw: s}, nil
	}
	u, err := parseHTTPURL(s)
	if err != nil {
		return ExternalURL{}, err
	}
	return ExternalURL{raw: u.String(), u: u}, nil
}

// IsTemplate reports a value rendered per request.
func (v ExternalURL) IsTemplate() bool { return v.u == nil && v.raw != "" }

// URL is the parsed address, nil for a template.
func (v ExternalURL) URL() *url.URL { return v.u }

func (v ExternalURL) String() string { return v.raw }

func (v ExternalURL) MarshalYAML() (any, error) { return v.raw, nil }

// Template is the source of a Jinja2 template (mock bodies, header values).
// Its syntax is checked by rule V21, which reports every bad one at once.
type Template string

func (v *Template) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a template string")
	if err != nil {
		return err
	}
	*v = Template(s)
	return nil
}

// Title names the dashboard: 1..64 characters, no control characters.
type Title string

// DefaultTitle is the dashboard's heading when none is set.
const DefaultTitle Title = "Doppel"

func (v *Title) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a title")
	if err != nil {
		return err
	}
	switch c := utf8.RuneCountInString(s); {
	case strings.TrimSpace(s) == "": // blank is empty, as in 1.1
		return refuse(n, "the title may not be empty or blank; leave it out for %q", DefaultTitle)
	case c > 64:
		return refuse(n, "the title is at most 64 characters, this one is %d", c)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return refuse(n, "the title may not contain control characters")
		}
	}
	*v = Title(s)
	return nil
}

// Path is a filesystem path (control socket, template directory).
type Path string

func (v *Path) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a path")
	if err != nil {
		return err
	}
	if s == "" {
		return refuse(n, "a path may not be empty; leave the key out for the default")
	}
	if strings.ContainsRune(s, 0) {
		return refuse(n, "a path may not contain a NUL byte")
	}
	*v = Path(s)
	return nil
}

// enum reads one of a fixed set of lower-case words.
func enum(n ast.Node, what string, allowed ...string) (string, error) {
	s, err := stringValue(n, what)
	if err != nil {
		return "", err
	}
	if slices.Contains(allowed, s) {
		return s, nil
	}
	return "", refuse(n, "%s is not a %s; use one of %s", quote(s), what, strings.Join(allowed, ", "))
}

// LogLevel is trace, debug, info, warn or error.
type LogLevel string

// LogLevels lists the accepted levels, lowest first.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

func (v *LogLevel) UnmarshalYAML(n ast.Node) error {
	s, err := enum(n, "log level", LogLevels...)
	*v = LogLevel(s)
	return err
}

// LogFormat is json or text.
type LogFormat string

// LogFormats lists the accepted formats.
var LogFormats = []string{"json", "text"}

func (v *LogFormat) UnmarshalYAML(n ast.Node) error {
	s, err := enum(n, "log format", LogFormats...)
	*v = LogFormat(s)
	return err
}

// ResolveKind says how a proxy is chosen: default or header.
type ResolveKind string

const (
	ResolveDefault ResolveKind = "default"
	ResolveHeader  ResolveKind = "header"
)

func (v *ResolveKind) UnmarshalYAML(n ast.Node) error {
	s, err := enum(n, "resolve type", string(ResolveDefault), string(ResolveHeader))
	*v = ResolveKind(s)
	return err
}

// ProxyKind is what a proxy forwards: requests (http) or connections (tcp).
type ProxyKind string

const KindHTTP ProxyKind = "http"

func (v *ProxyKind) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a proxy type")
	if err != nil {
		return err
	}
	switch s {
	case "http":
		*v = KindHTTP
		return nil
	case "tcp":
		*v = KindTCP
		return nil
	}
	return refuse(n, "%s is not a proxy type: http or tcp", quote(s))
}

// Subjects says who may perform an action: public, or a set of token and
// group names. An empty list means public.
type Subjects struct {
	Public bool
	Names  []Name // sorted, without duplicates
}

// PublicSubjects is what `public` and `[]` both mean.
var PublicSubjects = Subjects{Public: true}

// AdminSubjects is every action's default.
func AdminSubjects() Subjects { return Subjects{Names: []Name{GroupAdmin}} }

// The two predefined groups, and the keyword that is not a name.
const (
	GroupAdmin    Name = "admin"
	GroupUser     Name = "user"
	KeywordPublic      = "public"
)

func (v *Subjects) UnmarshalYAML(n ast.Node) error {
	var items []ast.Node
	if seq, ok := unwrap(n).(*ast.SequenceNode); ok {
		items = seq.Values
		if len(items) == 0 {
			*v = PublicSubjects
			return nil
		}
	} else {
		items = []ast.Node{n}
	}
	var s Subjects
	for _, item := range items {
		text, err := stringValue(item, "`public` or a token or group name")
		if err != nil {
			return err
		}
		if text == KeywordPublic {
			s.Public = true
			continue
		}
		if err := checkName(text, 64); err != nil {
			return refuse(item, "%v", err)
		}
		if !slices.Contains(s.Names, Name(text)) {
			s.Names = append(s.Names, Name(text))
		}
	}
	if s.Public {
		s.Names = nil
	}
	slices.Sort(s.Names)
	*v = s
	return nil
}

func (v Subjects) MarshalYAML() (any, error) {
	if v.Public {
		return KeywordPublic, nil
	}
	out := make([]string, len(v.Names))
	for i, name := range v.Names {
		out[i] = string(name)
	}
	return out, nil
}

// AllowedGroup is an entry of admin.groups: a name, or `*` for any.
type AllowedGroup string

// AnyGroup allows every name.
const AnyGroup AllowedGroup = "*"

func (v *AllowedGroup) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a group name or *")
	if err != nil {
		return err
	}
	if s != string(AnyGroup) {
		if err := checkName(s, 64); err != nil {
			return refuse(n, "%v", err)
		}
	}
	*v = AllowedGroup(s)
	return nil
}
