package main

// Expectations written by python 3.11 itself (json.dumps, posixpath.normpath,
// json.dumps of strings): the few pure functions whose edge cases the
// integration test (test/integration/guest-code/sandbox-agent.test.ts) does not reach.

import (
	"math"
	"testing"
)

func TestPythonFloat(t *testing.T) {
	for _, c := range []struct {
		value float64
		repr  string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{0x1.0000000000000p+0, "1.0"},
		{0x1.1c37937e08000p+53, "1e+16"},
		{0x1.c6bf526340000p+49, "1000000000000000.0"},
		{0x1.b69b4ba630f35p+56, "1.2345678901234568e+17"},
		{0x1.421f5f40d8376p-23, "1.5e-07"},
		{0x1.a36e2eb1c432dp-14, "0.0001"},
		{0x1.4f8b588e368f1p-17, "1e-05"},
		{0x1.8bcfe5687b74fp+40, "1700000000123.4568"},
		{0x1.4000000000000p+1, "2.5"},
		{0x1.0f0cf064dd592p+73, "1e+22"},
	} {
		if got := pythonFloat(c.value); got != c.repr {
			t.Errorf("pythonFloat(%v) = %s, python says %s", c.value, got, c.repr)
		}
	}
}

func TestNormpath(t *testing.T) {
	for _, c := range []struct{ path, normal string }{
		{"", "."},
		{"/", "/"},
		{"//", "//"},
		{"///", "/"},
		{"//a/../b", "//b"},
		{"a/..", "."},
		{"../a", "../a"},
		{"a/../../b", "../b"},
		{"/..", "/"},
		{"/a/./b/", "/a/b"},
		{"a//b", "a/b"},
		{".", "."},
	} {
		if got := normpath(c.path); got != c.normal {
			t.Errorf("normpath(%q) = %q, python says %q", c.path, got, c.normal)
		}
	}
}

func TestEncodeString(t *testing.T) {
	for _, c := range []struct{ text, json string }{
		{"plain", "\"plain\""},
		{"q\"b\\s", "\"q\\\"b\\\\s\""},
		{"ctl\u0001\u001f\u007f\u000a\u0009\u0008\u000c\u000d", "\"ctl\\u0001\\u001f\\u007f\\n\\t\\b\\f\\r\""},
		{"\u00e9\U0001f600", "\"\\u00e9\\ud83d\\ude00\""},
		{"\xff\xfe", "\"\\udcff\\udcfe\""},
	} {
		e := encoder{}
		e.str(c.text)
		if string(e.out) != c.json {
			t.Errorf("str(%q) = %s, python says %s", c.text, e.out, c.json)
		}
		parsed, err := parseJSON(c.json)
		if err != nil || parsed != c.text {
			t.Errorf("parseJSON(%s) = %q, %v", c.json, parsed, err)
		}
	}
}
