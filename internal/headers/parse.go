package headers

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Item is a member of a Structured Field List (RFC 9651) as ParseList
// reads it: a bare item and its parameters, in order. A bare item is a
// string, a Token, an int64, a float64 (decimal), a bool or a []byte (byte
// sequence); an inner list is an Item whose Inner is non-nil.
type Item struct {
	Value  any
	Params []Param
	Inner  []Item // an inner list's items; nil for a bare item
}

// Param is one parameter of an Item.
type Param struct {
	Key   string
	Value any // true when the parameter has no value
}

// Token is an sf-token, kept apart from strings.
type Token string

// Param returns the value of the parameter named key, and whether it is there.
func (it Item) Param(key string) (any, bool) {
	for _, p := range it.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

// ParseList parses a Structured Field List, the syntax of both RateLimit
// fields, strictly: any deviation from RFC 9651 is an error. Several field
// lines are parsed as one when joined with ", ".
func ParseList(field string) ([]Item, error) {
	p := &parser{s: field}
	p.skipSP()
	var out []Item
	for !p.done() {
		it, err := p.member()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if p.done() {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.errorf("want ',' after a list member")
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, p.errorf("trailing comma")
		}
	}
	return out, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("structured field at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) member() (Item, error) {
	if !p.done() && p.s[p.i] == '(' {
		return p.innerList()
	}
	return p.item()
}

func (p *parser) innerList() (Item, error) {
	p.i++ // (
	it := Item{Inner: []Item{}}
	for {
		p.skipSP()
		if p.done() {
			return Item{}, p.errorf("unterminated inner list")
		}
		if p.s[p.i] == ')' {
			p.i++
			params, err := p.params()
			it.Params = params
			return it, err
		}
		x, err := p.item()
		if err != nil {
			return Item{}, err
		}
		it.Inner = append(it.Inner, x)
		if !p.done() && p.s[p.i] != ' ' && p.s[p.i] != ')' {
			return Item{}, p.errorf("want a space or ')' in an inner list")
		}
	}
}

func (p *parser) item() (Item, error) {
	v, err := p.bareItem()
	if err != nil {
		return Item{}, err
	}
	params, err := p.params()
	return Item{Value: v, Params: params}, err
}

func (p *parser) params() ([]Param, error) {
	var out []Param
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		var v any = true
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for j := range out { // a repeated key keeps its place, takes the last value
			if out[j].Key == key {
				out[j].Value, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, Param{Key: key, Value: v})
		}
	}
	return out, nil
}

func isLcalpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool   { return isLcalpha(c) || (c >= 'A' && c <= 'Z') }

func (p *parser) key() (string, error) {
	if p.done() || !(isLcalpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", p.errorf("want a parameter key")
	}
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if !(isLcalpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *parser) bareItem() (any, error) {
	if p.done() {
		return nil, p.errorf("want an item")
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	}
	return nil, p.errorf("unexpected %q", p.s[p.i])
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits, frac, dot := 0, 0, false
	for ; !p.done(); p.i++ {
		c := p.s[p.i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if !isDigit(c) {
			break
		}
		if dot {
			frac++
		} else {
			digits++
		}
	}
	text := p.s[start:p.i]
	switch {
	case digits == 0:
		return nil, p.errorf("want digits in %q", text)
	case !dot && digits > 15:
		return nil, p.errorf("integer %q has more than 15 digits", text)
	case dot && (digits > 12 || frac == 0 || frac > 3):
		return nil, p.errorf("malformed decimal %q", text)
	case dot:
		f, err := strconv.ParseFloat(text, 64)
		return f, err
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err
}

func (p *parser) str() (any, error) {
	p.i++ // "
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return nil, p.errorf("bad escape in a string")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return nil, p.errorf("byte %#x in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return nil, errors.New("structured field: unterminated string")
}

func (p *parser) token() Token {
	start := p.i
	p.i++
	for !p.done() {
		c := p.s[p.i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte(`"(),;<=>?@[\]{}`, c) >= 0 {
			break
		}
		p.i++
	}
	return Token(p.s[start:p.i])
}

func (p *parser) bytes() (any, error) {
	p.i++ // :
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errorf("unterminated byte sequence")
	}
	text := p.s[p.i : p.i+end]
	p.i += end + 1
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, p.errorf("byte sequence: %v", err)
	}
	return b, nil
}

func (p *parser) boolean() (any, error) {
	p.i++ // ?
	if p.done() || (p.s[p.i] != '0' && p.s[p.i] != '1') {
		return nil, p.errorf("want ?0 or ?1")
	}
	v := p.s[p.i] == '1'
	p.i++
	return v, nil
}
