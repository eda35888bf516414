package main

// The agent's JSON against python's json module, whose bytes the wire keeps (json.go): what
// parseJSON takes and refuses as json.loads does, and what the encoder writes as json.dumps
// does. Expectations written by python 3.11.

import (
	"math"
	"sort"
	"strings"
	"testing"
)

func encoded(value any, spaced bool) string {
	e := encoder{spaced: spaced}
	e.value(value)
	return string(e.out)
}

func TestParseKeepsKeyOrderAndTheLastOfARepeatedKey(t *testing.T) {
	value, err := parseJSON(`{"b": 1, "a": 2, "b": 3}`)
	if err != nil {
		t.Fatal(err)
	}
	o := value.(*object)
	// python: {'b': 3, 'a': 2}
	if strings.Join(o.keys, ",") != "b,a" || o.values["b"].(number).value != 3 {
		t.Errorf("keys %v, b = %v; python keeps b first with its last value", o.keys, o.values["b"])
	}
	if got := encoded(o, false); got != `{"b":3,"a":2}` {
		t.Errorf("written back as %s", got)
	}
}

func TestParseTellsIntegersFromFloats(t *testing.T) {
	for _, c := range []struct {
		text    string
		integer bool
		written string
	}{
		{"7", true, "7"},
		{"-12", true, "-12"},
		{"1.5e+3", false, "1500.0"},
		{"1E2", false, "100.0"},
		{"2.0", false, "2.0"},
		{"NaN", false, "NaN"},
		{"-Infinity", false, "-Infinity"},
	} {
		value, err := parseJSON(c.text)
		if err != nil {
			t.Errorf("parseJSON(%s): %v", c.text, err)
			continue
		}
		_, integer := value.(number)
		if integer != c.integer || encoded(value, false) != c.written {
			t.Errorf("parseJSON(%s) = %#v, written %s; python: int %v, %s", c.text, value, encoded(value, false), c.integer, c.written)
		}
	}
}

func TestAnIntegerPastInt64IsClampedButWrittenAsGiven(t *testing.T) {
	for _, text := range []string{"123456789012345678901234567890", "-123456789012345678901234567890"} {
		value, err := parseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		n := value.(number)
		if !n.overflow || (n.value != math.MaxInt64 && n.value != math.MinInt64) || encoded(n, false) != text {
			t.Errorf("parseJSON(%s) = %#v, written %s", text, n, encoded(n, false))
		}
	}
	// python 3.11 makes no int of more than 4300 digits.
	if _, err := parseJSON(strings.Repeat("9", 4301)); err == nil {
		t.Error("an integer of 4301 digits was taken")
	}
}

func TestParseRefusesWhatPythonRefuses(t *testing.T) {
	for _, text := range []string{"", "01", "1.", "-", "1e", "[1,]", "{\"a\":1,}", "\"a\x01\"", "nan", "True", "\"\\x41\"", "\"unterminated", "[1] 2", "{1: 2}"} {
		if value, err := parseJSON(text); err == nil {
			t.Errorf("parseJSON(%q) = %#v; python refuses it", text, value)
		}
	}
	if value, err := parseJSON(" \t\n7\r\n"); err != nil || value.(number).value != 7 {
		t.Errorf("whitespace around a value: %#v, %v", value, err)
	}
}

func TestNestingIsBounded(t *testing.T) {
	if _, err := parseJSON(strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if _, err := parseJSON(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)); err == nil {
		t.Errorf("%d levels were taken", maxDepth+1)
	}
}

func TestEscapedSurrogates(t *testing.T) {
	for _, c := range []struct{ json, text string }{
		// A pair is one character.
		{`"\ud83d\ude00"`, "\U0001f600"},
		// U+DC80..U+DCFF is the byte python's surrogateescape stands it for.
		{`"a\udcffb"`, "a\xffb"},
		// A lone surrogate no system call could take: the replacement character.
		{`"\ud800"`, "\ufffd"},
		{`"\ud83d\u0041"`, "\ufffdA"},
		{`"\/\b\f\n\r\t"`, "/\b\f\n\r\t"},
	} {
		value, err := parseJSON(c.json)
		if err != nil || value != c.text {
			t.Errorf("parseJSON(%s) = %q, %v; want %q", c.json, value, err, c.text)
		}
	}
}

func TestEncoderWritesPythonsSeparators(t *testing.T) {
	value := members{{"k", []any{int64(1), float{2}, nil, true, "\u00e9"}}, {"names", []string{"a", "b"}}}
	if got := encoded(value, false); got != `{"k":[1,2.0,null,true,"\u00e9"],"names":["a","b"]}` {
		t.Errorf("compact: %s", got)
	}
	// json.dumps' default separators, as a listing's limit counts an entry.
	if got := encoded(value, true); got != `{"k": [1, 2.0, null, true, "\u00e9"], "names": ["a", "b"]}` {
		t.Errorf("spaced: %s", got)
	}
}

func TestPythonLessOrdersByCodePoint(t *testing.T) {
	// python: sorted(['\ue000', 'b', '\udcff', '\U0001f600', 'ab', 'a']); a byte that is not
	// UTF-8 sorts as its surrogate, below U+E000, where Go's byte order would put it above.
	names := []string{"\ue000", "b", "\xff", "\U0001f600", "ab", "a"}
	sort.Slice(names, func(i, j int) bool { return pythonLess(names[i], names[j]) })
	want := []string{"a", "ab", "b", "\xff", "\ue000", "\U0001f600"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("sorted %q, python %q", names, want)
	}
}
