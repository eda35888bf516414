package main

// A request's fields, checked by name (each refusal names the field, and the count where one
// is bounded): the type of each, then its range.

// bytes are what followed the request's JSON past a NUL (a file's chunk, a process's input),
// nil when nothing did.
type request struct {
	*object
	bytes []byte
}

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

// data is the request's bytes, sent raw after its JSON (a file's, a process's input).
func (r request) data() ([]byte, error) {
	if r.bytes == nil {
		return nil, invalid("data: expected bytes after the request")
	}
	return r.bytes, nil
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
