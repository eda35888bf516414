package main

// What an entry says of a file (entries.go) as python's stat and bytes.decode said it, and what a
// write's metadata may hold. Expectations written by python 3.11.

import "testing"

func TestFilemodeIsPythons(t *testing.T) {
	for _, c := range []struct {
		mode uint32
		text string
	}{
		{0o100644, "-rw-r--r--"},
		{0o40755, "drwxr-xr-x"},
		{0o120777, "lrwxrwxrwx"},
		{0o104755, "-rwsr-xr-x"},
		{0o102644, "-rw-r-Sr--"},
		{0o41777, "drwxrwxrwt"},
		{0o41776, "drwxrwxrwT"},
		{0o10600, "prw-------"},
		{0o140700, "srwx------"},
		{0o20666, "crw-rw-rw-"},
		{0o60660, "brw-rw----"},
		{0o106000, "---S--S---"},
	} {
		if got := filemode(c.mode); got != c.text {
			t.Errorf("filemode(%o) = %s, python says %s", c.mode, got, c.text)
		}
	}
}

func TestMetadataValuesDecodeAsASCII(t *testing.T) {
	// python: b'\xc3\xa9\xff'.decode("ascii", "replace"): one replacement per byte.
	if got := asciiOrReplacement([]byte("a\xc3\xa9\xffz")); got != "a\ufffd\ufffd\ufffdz" {
		t.Errorf("asciiOrReplacement = %q", got)
	}
}

func TestAWritesMetadataIsPrintableASCII(t *testing.T) {
	parse := func(text string) request {
		value, err := parseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		return request{object: value.(*object)}
	}
	if metadata, err := metadataField(parse(`{"metadata": {"author": "mish", "stage": "final draft ~1"}}`)); err != nil || len(metadata.keys) != 2 {
		t.Errorf("printable metadata: %v, %v", metadata, err)
	}
	if metadata, err := metadataField(parse(`{"metadata": null}`)); err != nil || metadata == nil || len(metadata.keys) != 0 {
		t.Errorf("no metadata: %v, %v", metadata, err)
	}
	for _, text := range []string{
		`{"metadata": {"author": "m\u00e9"}}`,
		`{"metadata": {"line\n": "x"}}`,
		`{"metadata": {"count": 3}}`,
		`{"metadata": ["a"]}`,
	} {
		if _, err := metadataField(parse(text)); err == nil || failureOf(err)[0].value != "invalid" {
			t.Errorf("%s: %v, want invalid", text, err)
		}
	}
}
