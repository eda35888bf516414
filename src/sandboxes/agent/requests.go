package main

// A request's fields, checked by name (each refusal names the field, and the count where one
// is bounded): the type of each, then its range.

type request struct{ *object }

// lookup is python's request.get(name): an absent field and a null one are alike.
func (r request) lookup(name string) any {
	value, _ := r.get(name)
	return value
}

func expected(name, kind string) error { return invalid("%s: expected %s", name, kind) }

func (r request) text(name string) (string, error) {
	value, ok := r.lookup(name).(string)
	if !ok {
		return "", expected(name, "str")
	}
	return value, nil
}

// data is the request's bytes, sent base64 in its "data" field (a file's, a process's input).
func (r request) data() ([]byte, error) {
	text, err := r.text("data")
	if err != nil {
		return nil, err
	}
	return decodeBase64(text)
}

// optionalText is a string field that may be absent (or null): ok says whether it is there.
func (r request) optionalText(name string) (value string, ok bool, err error) {
	switch v := r.lookup(name).(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	}
	return "", false, expected(name, "str")
}

func (r request) boolean(name string) (bool, error) {
	value, ok := r.lookup(name).(bool)
	if !ok {
		return false, expected(name, "bool")
	}
	return value, nil
}

func (r request) list(name string) ([]any, error) {
	value, ok := r.lookup(name).([]any)
	if !ok {
		return nil, expected(name, "list")
	}
	return value, nil
}

func (r request) dict(name string, optional bool) (*object, error) {
	switch v := r.lookup(name).(type) {
	case *object:
		return v, nil
	case nil:
		if optional {
			return nil, nil
		}
	}
	return nil, expected(name, "dict")
}

// noMaximum is a count without an upper bound.
const noMaximum = -1

// count is an integer field (never a boolean, never a float) in [minimum, maximum].
func (r request) count(name string, minimum, maximum int64) (number, error) {
	value, ok := r.lookup(name).(number)
	if !ok {
		return number{}, expected(name, "int")
	}
	if value.value < minimum || (maximum != noMaximum && value.value > maximum) {
		return number{}, invalid("%s: out of range", name)
	}
	return value, nil
}

// decodeBase64 is python's binascii.a2b_base64 in strict mode: the alphabet only, no
// whitespace, padding only at the end and only where it belongs. The bits a last character
// carries past the data are dropped, not checked.
func decodeBase64(text string) ([]byte, error) {
	bad := invalid("data: not base64")
	if len(text) > 0 && text[0] == '=' {
		return nil, bad
	}
	out := make([]byte, 0, len(text)/4*3+3)
	quad, pads := 0, 0
	var left byte
	padding := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '=' {
			padding = true
			if quad == 0 {
				return nil, bad
			}
			if quad >= 2 {
				pads++
				if quad+pads >= 4 {
					if i+1 < len(text) {
						return nil, bad
					}
					return out, nil
				}
			}
			continue
		}
		value := base64Value[c]
		if value >= 64 || padding {
			return nil, bad
		}
		pads = 0
		switch quad {
		case 0:
			left = value
		case 1:
			out = append(out, left<<2|value>>4)
			left = value & 0x0f
		case 2:
			out = append(out, left<<4|value>>2)
			left = value & 0x03
		case 3:
			out = append(out, left<<6|value)
		}
		quad = (quad + 1) % 4
	}
	if quad != 0 {
		return nil, bad
	}
	return out, nil
}

var base64Value = func() (table [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range table {
		table[i] = 255
	}
	for i := 0; i < len(alphabet); i++ {
		table[alphabet[i]] = byte(i)
	}
	return table
}()
