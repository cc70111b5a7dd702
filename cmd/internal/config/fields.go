package config

import "gopkg.in/yaml.v3"

// fieldOf is one field a mapping of the language may have, and how its
// value is decoded into the typed struct T that stands for the mapping.
// A table of them is the mapping's schema: decodeFields refuses a field the
// table does not name, which is what yaml.v3's KnownFields does for a Go
// struct, while keeping Envoy's readings of scalars (see str, boolean and
// integer) and this package's messages.
type fieldOf[T any] struct {
	name   string
	decode func(d *decoder, f field, ctx string, t *T) error
}

// decodeFields decodes the fields of a mapping, in file order, into t;
// ctx names the mapping in errors. It returns the key node of each field
// given, by name, for the checks across fields and their lines.
func decodeFields[T any](d *decoder, fs []field, ctx string, table []fieldOf[T], t *T) (map[string]*yaml.Node, error) {
	given := make(map[string]*yaml.Node, len(fs))
	for _, f := range fs {
		i := indexOf(table, f.name)
		if i < 0 {
			return nil, d.unknown(f, ctx, names(table))
		}
		given[f.name] = f.key
		if err := table[i].decode(d, f, ctx, t); err != nil {
			return nil, err
		}
	}
	return given, nil
}

func indexOf[T any](table []fieldOf[T], name string) int {
	for i, f := range table {
		if f.name == name {
			return i
		}
	}
	return -1
}

func names[T any](table []fieldOf[T]) []string {
	out := make([]string, len(table))
	for i, f := range table {
		out[i] = f.name
	}
	return out
}

// what names a field of the mapping ctx in errors: "ctx: name".
func (f field) what(ctx string) string { return ctx + ": " + f.name }

// ignored decodes nothing: a field read elsewhere.
func ignored[T any](*decoder, field, string, *T) error { return nil }

// boolInto decodes true or false into the bool at of.
func boolInto[T any](at func(*T) *bool) func(*decoder, field, string, *T) error {
	return func(d *decoder, f field, ctx string, t *T) (err error) {
		*at(t), err = d.boolean(f.value, f.what(ctx))
		return err
	}
}

// intInto decodes a whole number of at least 0 into the int64 at of.
func intInto[T any](at func(*T) *int64) func(*decoder, field, string, *T) error {
	return func(d *decoder, f field, ctx string, t *T) (err error) {
		*at(t), err = d.integer(f.value, f.what(ctx))
		return err
	}
}

// strInto decodes a string into the string at of.
func strInto[T any](at func(*T) *string) func(*decoder, field, string, *T) error {
	return func(d *decoder, f field, ctx string, t *T) (err error) {
		*at(t), err = d.str(f.value, f.what(ctx))
		return err
	}
}

// nodeInto keeps the value's node at of, for a field decoded once the
// mapping is read; null is as if the field were not given.
func nodeInto[T any](at func(*T) **yaml.Node) func(*decoder, field, string, *T) error {
	return func(_ *decoder, f field, _ string, t *T) error {
		if !isNull(f.value) {
			*at(t) = f.value
		}
		return nil
	}
}
