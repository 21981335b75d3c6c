package testutil

import (
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// WireFieldsCovered fails t for every JSON field the consumer's type
// decodes that the producer's type does not encode: a field renamed or
// dropped on the writing side, which a reader would otherwise take as
// absent and show as empty. It follows nested structs, pointers, slices,
// arrays and map values; a type with its own JSON or text (un)marshalling
// (time.Time, a flexible port) is a leaf, compared by name only. what
// names the artifact in the errors. Names match without regard to case,
// as encoding/json decodes them. unwritten lists the fields (by path
// below the artifact, "containers.started") the consumer reads only when
// present and no producer writes yet; each must still be uncovered, so
// the list stays true.
func WireFieldsCovered(t testing.TB, what string, consumer, producer any, unwritten ...string) {
	t.Helper()
	missing := uncovered(reflect.TypeOf(consumer), reflect.TypeOf(producer), "")
	for _, f := range missing {
		if !slices.Contains(unwritten, f) {
			t.Errorf("%s: the consumer reads %s, which the producer does not write", what, f)
		}
	}
	for _, f := range unwritten {
		if !slices.Contains(missing, f) {
			t.Errorf("%s: %s is written now (or no longer read): drop it from the unwritten list", what, f)
		}
	}
}

func uncovered(c, p reflect.Type, path string) []string {
	c, p = container(c), container(p)
	if c.Kind() != reflect.Struct || p.Kind() != reflect.Struct || leaf(c) || leaf(p) {
		return nil
	}
	pf := jsonFields(p)
	var out []string
	for name, ct := range jsonFields(c) {
		pt, ok := pf[name]
		sub := strings.TrimPrefix(path+"."+name, ".")
		if !ok {
			out = append(out, sub)
			continue
		}
		out = append(out, uncovered(ct, pt, sub)...)
	}
	slices.Sort(out)
	return out
}

// container strips pointers, slices, arrays and maps down to what they hold.
func container(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
)

// leaf: a type that encodes itself, so its fields are not its wire form.
func leaf(t reflect.Type) bool {
	for _, i := range []reflect.Type{jsonUnmarshaler, jsonMarshaler, textUnmarshaler, textMarshaler} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

// jsonFields are t's fields by their JSON names, with embedded structs'
// fields promoted as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && container(f.Type).Kind() == reflect.Struct {
			maps.Copy(out, jsonFields(container(f.Type)))
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[strings.ToLower(name)] = f.Type
	}
	return out
}
