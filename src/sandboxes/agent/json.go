package main

// The JSON of the agent's wire as python's json module wrote it (the first agent was python),
// reproduced rather than taken from encoding/json: the host and its tests rely on those bytes.
// That means objects that
// keep their keys' order (envs come back in a listing as they were given), integers kept apart
// from floats and never rounded, python's literals (NaN, Infinity), and on output only ASCII,
// the rest escaped as \uXXXX. A string holds the bytes python would hand the system for it: a
// lone surrogate U+DC80..U+DCFF is the byte it escapes (surrogateescape, how python decodes a
// file name that is not UTF-8), and such a byte is written back as that surrogate.

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// object is a JSON object in the order of its keys; a repeated key keeps its first place and
// takes its last value, as a python dict built from the pairs does.
type object struct {
	keys   []string
	values map[string]any
}

func newObject() *object { return &object{values: map[string]any{}} }

func (o *object) set(key string, value any) *object {
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = value
	return o
}

func (o *object) get(key string) (any, bool) {
	value, ok := o.values[key]
	return value, ok
}

// number is a JSON integer as written (python makes an int of a number without fraction or
// exponent, of any size; a float of the rest). value is the int, clamped to int64 when it is
// larger (overflow).
type number struct {
	text     string
	value    int64
	overflow bool
}

// float is a python float: NaN, the infinities and anything with a fraction or an exponent.
type float struct{ value float64 }

// maxDepth bounds nesting: python's parser gives up (with RecursionError) near its recursion
// limit, and no request of the contract nests more than three deep.
const maxDepth = 900

type parser struct {
	text  string
	at    int
	depth int
}

type syntaxError struct{}

func (syntaxError) Error() string { return "not JSON" }

// parseJSON reads one value and nothing but whitespace around it; text must be valid UTF-8.
func parseJSON(text string) (value any, err error) {
	p := &parser{text: text}
	defer func() {
		if recover() != nil {
			value, err = nil, syntaxError{}
		}
	}()
	p.space()
	value = p.value()
	p.space()
	if p.at != len(p.text) {
		panic(syntaxError{})
	}
	return value, nil
}

func (p *parser) space() {
	for p.at < len(p.text) {
		switch p.text[p.at] {
		case ' ', '\t', '\n', '\r':
			p.at++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.at >= len(p.text) {
		panic(syntaxError{})
	}
	return p.text[p.at]
}

func (p *parser) literal(word string) bool {
	if len(p.text)-p.at >= len(word) && p.text[p.at:p.at+len(word)] == word {
		p.at += len(word)
		return true
	}
	return false
}

func (p *parser) value() any {
	switch c := p.peek(); {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		p.at++
		return p.str()
	case p.literal("null"):
		return nil
	case p.literal("true"):
		return true
	case p.literal("false"):
		return false
	case p.literal("NaN"):
		return float{math.NaN()}
	case p.literal("Infinity"):
		return float{math.Inf(1)}
	case p.literal("-Infinity"):
		return float{math.Inf(-1)}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	panic(syntaxError{})
}

func (p *parser) nest() {
	p.depth++
	if p.depth > maxDepth {
		panic(syntaxError{})
	}
}

func (p *parser) object() *object {
	p.nest()
	p.at++
	o := newObject()
	p.space()
	if p.peek() == '}' {
		p.at++
		p.depth--
		return o
	}
	for {
		if p.peek() != '"' {
			panic(syntaxError{})
		}
		p.at++
		key := p.str()
		p.space()
		if p.peek() != ':' {
			panic(syntaxError{})
		}
		p.at++
		p.space()
		o.set(key, p.value())
		p.space()
		switch p.peek() {
		case ',':
			p.at++
			p.space()
		case '}':
			p.at++
			p.depth--
			return o
		default:
			panic(syntaxError{})
		}
	}
}

func (p *parser) array() []any {
	p.nest()
	p.at++
	items := []any{}
	p.space()
	if p.peek() == ']' {
		p.at++
		p.depth--
		return items
	}
	for {
		items = append(items, p.value())
		p.space()
		switch p.peek() {
		case ',':
			p.at++
			p.space()
		case ']':
			p.at++
			p.depth--
			return items
		default:
			panic(syntaxError{})
		}
	}
}

func digits(text string, at int) int {
	for at < len(text) && text[at] >= '0' && text[at] <= '9' {
		at++
	}
	return at
}

// number follows python's pattern: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?
func (p *parser) number() any {
	start := p.at
	at := p.at
	if p.text[at] == '-' {
		at++
	}
	if at >= len(p.text) || p.text[at] < '0' || p.text[at] > '9' {
		panic(syntaxError{})
	}
	if p.text[at] == '0' {
		at++
	} else {
		at = digits(p.text, at)
	}
	integer := true
	if at+1 < len(p.text) && p.text[at] == '.' && p.text[at+1] >= '0' && p.text[at+1] <= '9' {
		at = digits(p.text, at+1)
		integer = false
	}
	if at < len(p.text) && (p.text[at] == 'e' || p.text[at] == 'E') {
		exponent := at + 1
		if exponent < len(p.text) && (p.text[exponent] == '-' || p.text[exponent] == '+') {
			exponent++
		}
		if end := digits(p.text, exponent); end > exponent {
			at = end
			integer = false
		}
	}
	p.at = at
	text := p.text[start:at]
	// python 3.11 refuses to make an int of more digits than this (sys.int_info).
	if integer && len(strings.TrimPrefix(text, "-")) > 4300 {
		panic(syntaxError{})
	}
	if !integer {
		value, _ := strconv.ParseFloat(text, 64)
		return float{value}
	}
	value, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		value = 1<<63 - 1
		if text[0] == '-' {
			value = -1 << 63
		}
	}
	return number{text: text, value: value, overflow: err != nil}
}

func hex4(text string) (rune, bool) {
	if len(text) < 4 {
		return 0, false
	}
	value, err := strconv.ParseUint(text[:4], 16, 32)
	return rune(value), err == nil
}

func (p *parser) str() string {
	var out []byte
	start := p.at
	for {
		c := p.peek()
		switch {
		case c == '"':
			p.at++
			if out == nil {
				return p.text[start : p.at-1]
			}
			return string(out)
		case c < 0x20:
			panic(syntaxError{})
		case c != '\\':
			p.at++
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append([]byte{}, p.text[start:p.at]...)
		}
		p.at++
		escape := p.peek()
		p.at++
		switch escape {
		case '"', '\\', '/':
			out = append(out, escape)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.text[p.at:])
			if !ok {
				panic(syntaxError{})
			}
			p.at += 4
			if r >= 0xD800 && r <= 0xDBFF && len(p.text)-p.at >= 6 && p.text[p.at:p.at+2] == `\u` {
				if low, ok := hex4(p.text[p.at+2:]); ok && low >= 0xDC00 && low <= 0xDFFF {
					p.at += 6
					r = 0x10000 + (r-0xD800)<<10 + (low - 0xDC00)
				}
			}
			switch {
			case r >= 0xDC80 && r <= 0xDCFF:
				out = append(out, byte(r-0xDC00))
			case r >= 0xD800 && r <= 0xDFFF:
				// A lone surrogate python keeps, and no system call could take: the nearest
				// text that is valid.
				out = utf8.AppendRune(out, utf8.RuneError)
			default:
				out = utf8.AppendRune(out, r)
			}
		default:
			panic(syntaxError{})
		}
	}
}

// kv is one member of an object written out, in order.
type kv struct {
	key   string
	value any
}

type members []kv

// encoder writes python's json.dumps: compact (separators "," and ":") as every frame is, or
// spaced (", " and ": ", the default) to measure an entry as the listing's limit counts it.
type encoder struct {
	out    []byte
	spaced bool
}

const hexDigits = "0123456789abcdef"

func (e *encoder) escapeUnit(r rune) {
	e.out = append(e.out, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
}

func (e *encoder) str(text string) {
	e.out = append(e.out, '"')
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"':
				e.out = append(e.out, '\\', '"')
			case c == '\\':
				e.out = append(e.out, '\\', '\\')
			case c == '\n':
				e.out = append(e.out, '\\', 'n')
			case c == '\r':
				e.out = append(e.out, '\\', 'r')
			case c == '\t':
				e.out = append(e.out, '\\', 't')
			case c == '\b':
				e.out = append(e.out, '\\', 'b')
			case c == '\f':
				e.out = append(e.out, '\\', 'f')
			case c < 0x20 || c == 0x7f:
				e.escapeUnit(rune(c))
			default:
				e.out = append(e.out, c)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			e.escapeUnit(0xDC00 + rune(c))
		} else if r > 0xFFFF {
			r -= 0x10000
			e.escapeUnit(0xD800 + r>>10)
			e.escapeUnit(0xDC00 + r&0x3FF)
		} else {
			e.escapeUnit(r)
		}
		i += size
	}
	e.out = append(e.out, '"')
}

func (e *encoder) comma() {
	e.out = append(e.out, ',')
	if e.spaced {
		e.out = append(e.out, ' ')
	}
}

func (e *encoder) colon() {
	e.out = append(e.out, ':')
	if e.spaced {
		e.out = append(e.out, ' ')
	}
}

func (e *encoder) value(value any) {
	switch v := value.(type) {
	case nil:
		e.out = append(e.out, "null"...)
	case bool:
		e.out = strconv.AppendBool(e.out, v)
	case int:
		e.out = strconv.AppendInt(e.out, int64(v), 10)
	case int64:
		e.out = strconv.AppendInt(e.out, v, 10)
	case number:
		e.out = append(e.out, v.text...)
	case float:
		e.out = append(e.out, pythonFloat(v.value)...)
	case string:
		e.str(v)
	case []any:
		e.out = append(e.out, '[')
		for i, item := range v {
			if i > 0 {
				e.comma()
			}
			e.value(item)
		}
		e.out = append(e.out, ']')
	case []string:
		e.out = append(e.out, '[')
		for i, item := range v {
			if i > 0 {
				e.comma()
			}
			e.str(item)
		}
		e.out = append(e.out, ']')
	case members:
		e.out = append(e.out, '{')
		for i, member := range v {
			if i > 0 {
				e.comma()
			}
			e.str(member.key)
			e.colon()
			e.value(member.value)
		}
		e.out = append(e.out, '}')
	case *object:
		e.out = append(e.out, '{')
		for i, key := range v.keys {
			if i > 0 {
				e.comma()
			}
			e.str(key)
			e.colon()
			e.value(v.values[key])
		}
		e.out = append(e.out, '}')
	default:
		panic("json: no encoding for a value of this type")
	}
}

// pythonFloat is repr() of a python float: the shortest digits that read back the same, fixed
// between 1e-4 and 1e16, else with an exponent; ".0" marks an integral value as a float.
func pythonFloat(value float64) string {
	switch {
	case value != value:
		return "NaN"
	case math.IsInf(value, 1):
		return "Infinity"
	case math.IsInf(value, -1):
		return "-Infinity"
	}
	scientific := strconv.FormatFloat(value, 'e', -1, 64)
	exponent := 0
	for i := len(scientific) - 1; i >= 0; i-- {
		if scientific[i] == 'e' {
			exponent, _ = strconv.Atoi(scientific[i+1:])
			break
		}
	}
	// python's decimal point position is one past the exponent of d.ddd
	if decpt := exponent + 1; decpt <= -4 || decpt > 16 {
		return scientific
	}
	fixed := strconv.FormatFloat(value, 'f', -1, 64)
	for i := 0; i < len(fixed); i++ {
		if fixed[i] == '.' {
			return fixed
		}
	}
	return fixed + ".0"
}

// pythonLess orders two strings as python orders its str: by code point, a byte that is not
// UTF-8 counting as the surrogate that stands for it.
func pythonLess(a, b string) bool {
	for len(a) > 0 && len(b) > 0 {
		ra, sa := decodePython(a)
		rb, sb := decodePython(b)
		if ra != rb {
			return ra < rb
		}
		a, b = a[sa:], b[sb:]
	}
	return len(a) < len(b)
}

func decodePython(text string) (rune, int) {
	r, size := utf8.DecodeRuneInString(text)
	if r == utf8.RuneError && size == 1 {
		return 0xDC00 + rune(text[0]), 1
	}
	return r, size
}
