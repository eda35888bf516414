package main

// A watch's event names, decoded as python decoded them (watch.go replaceInvalid): each maximal
// ill-formed part of the UTF-8 becomes one U+FFFD. Expectations written by python 3.11.

import "testing"

func TestReplaceInvalidIsPythons(t *testing.T) {
	for _, c := range []struct{ bytes, text string }{
		{"plain \u00e9", "plain \u00e9"},
		{"a\xffb", "a\ufffdb"},
		// A truncated sequence is one part; what could not continue it starts anew.
		{"\xe2\x82", "\ufffd"},
		{"\xe2\x82x", "\ufffdx"},
		{"\xf0\x9f\x98", "\ufffd"},
		// Surrogates, overlong forms and code points past U+10FFFF: a replacement per byte.
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
		{"\xc0\xaf", "\ufffd\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
	} {
		if got := replaceInvalid(c.bytes); got != c.text {
			t.Errorf("replaceInvalid(%q) = %q, python says %q", c.bytes, got, c.text)
		}
	}
}
