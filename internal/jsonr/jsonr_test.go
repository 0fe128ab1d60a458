package jsonr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzValueEndsWhereJSONDoes: on a valid JSON text, Value takes the whole
// value and nothing after it, whatever the value is.
func FuzzValueEndsWhereJSONDoes(f *testing.F) {
	for _, s := range []string{`1`, `-0.5e3`, `"a\"b"`, `"\\"`, `{"a":[1,{"b":"}"}]}`, `[ ]`, `true`, `null`, ` {"x" : "]"} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if !json.Valid(text) {
			return
		}
		s := New(text)
		s.WS()
		v, ok := s.Value()
		if !ok || !s.End() {
			t.Fatalf("%q: Value %q, %v, then not at the end", text, v, ok)
		}
		if want := bytes.TrimSpace(text); !bytes.Equal(v, want) {
			t.Fatalf("%q: Value %q, want %q", text, v, want)
		}
	})
}

func TestValueStopsAtDelimiter(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`12,3`, `12`}, {`"a,b" x`, `"a,b"`}, {`{"a":1}]`, `{"a":1}`}, {`tru}`, `tru`}, {`[1,[2]],`, `[1,[2]]`},
	} {
		s := New([]byte(c.in))
		if v, ok := s.Value(); !ok || string(v) != c.want {
			t.Errorf("%q: Value %q, %v; want %q", c.in, v, ok, c.want)
		}
	}
	for _, in := range []string{``, `}`, `,`, `"open`, `[1,2`, `{"a":[}`} {
		s := New([]byte(in))
		if v, ok := s.Value(); ok && json.Valid(v) {
			t.Errorf("%q: Value %q, a valid value", in, v)
		}
	}
}

func TestIntTakesOnlyWholeNumbersEncodingJSONTakes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{`0`, 0}, {`-7,`, -7}, {`123456789012345}`, 123456789012345}, {`42 `, 42}, {`9]`, 9}} {
		s := New([]byte(c.in))
		if n, ok := s.Int(); !ok || n != c.want {
			t.Errorf("%q: Int %d, %v; want %d", c.in, n, ok, c.want)
		}
	}
	for _, in := range []string{``, `-`, `01`, `1.5`, `1e3`, `1234567890123456`, `x`, `"1"`} {
		s := New([]byte(in))
		if n, ok := s.Int(); ok {
			t.Errorf("%q: Int %d, want it declined", in, n)
		}
	}
}

func TestStrDeclinesEscapesAndControls(t *testing.T) {
	s := New([]byte(`"plain é"`))
	if v, ok := s.Text(); !ok || v != "plain é" {
		t.Errorf("Text %q, %v", v, ok)
	}
	for _, in := range []string{`"a\"b"`, "\"a\nb\"", `"open`, `x`, ``} {
		s := New([]byte(in))
		if v, ok := s.Str(); ok {
			t.Errorf("%q: Str %q, want it declined", in, v)
		}
	}
}

func TestObjectAndArray(t *testing.T) {
	s := New([]byte(` { "a" : [ 1 , 2 ] , "b" : [] } `))
	got := map[string][]int{}
	ok := s.Object(func(name []byte) bool {
		k := string(name)
		got[k] = []int{}
		return s.Array(func() bool {
			n, ok := s.Int()
			got[k] = append(got[k], n)
			return ok
		})
	})
	if !ok || !s.End() || len(got) != 2 || len(got["a"]) != 2 || got["a"][1] != 2 || len(got["b"]) != 0 {
		t.Fatalf("ok %v, got %v", ok, got)
	}
	for _, in := range []string{`{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1]`, `{"a":1`} {
		s := New([]byte(in))
		if s.Object(func([]byte) bool { _, ok := s.Int(); return ok }) && s.End() {
			t.Errorf("%q: read as an object", in)
		}
	}
	for _, in := range []string{`[1,]`, `[1 2]`, `[,1]`, `{}`, `[1`} {
		s := New([]byte(in))
		if s.Array(func() bool { _, ok := s.Int(); return ok }) && s.End() {
			t.Errorf("%q: read as an array", in)
		}
	}
}

func TestBoolTakesOnlyTheLiterals(t *testing.T) {
	for _, c := range []struct {
		in      string
		v, ok   bool
		stopped string
	}{
		{`true`, true, true, ``}, {`false,`, false, true, `,`}, {`true}`, true, true, `}`}, {`false ]`, false, true, ` ]`},
		{`null`, false, false, ``}, {`truex`, false, false, ``}, {`tru`, false, false, ``}, {`"true"`, false, false, ``}, {`falsey`, false, false, ``}, {`1`, false, false, ``},
	} {
		s := New([]byte(c.in))
		v, ok := s.Bool()
		if v != c.v || ok != c.ok || (ok && string(s.b[s.i:]) != c.stopped) {
			t.Errorf("%q: Bool %v, %v, rest %q; want %v, %v, rest %q", c.in, v, ok, s.b[s.i:], c.v, c.ok, c.stopped)
		}
	}
}
