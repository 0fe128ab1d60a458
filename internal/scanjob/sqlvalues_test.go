package scanjob

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestJSONValue: what a driver scanned becomes what the column means;
// MySQL's text protocol gives bytes for every type.
func TestJSONValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in     any
		dbType string
		want   any
	}{
		{[]byte("42"), "INT", int64(42)},
		{[]byte("-7"), "BIGINT", int64(-7)},
		{[]byte("18446744073709551615"), "UNSIGNED BIGINT", uint64(18446744073709551615)},
		{[]byte("2030"), "YEAR", int64(2030)},
		{[]byte("12.50"), "DECIMAL", json.Number("12.50")},
		{[]byte("1e3"), "DOUBLE", json.Number("1e3")},
		{[]byte{0, 1}, "BLOB", []byte{0, 1}},
		{[]byte{0, 1}, "VARBINARY", []byte{0, 1}},
		{[]byte("abc"), "VARCHAR", "abc"},
		{[]byte("x"), "INT", "x"}, // not a number after all: kept as text
		{int64(3), "INT8", int64(3)},
		{nil, "TEXT", nil},
	} {
		if got := jsonValue(c.in, c.dbType); !reflect.DeepEqual(got, c.want) {
			t.Errorf("jsonValue(%#v, %s) = %#v, want %#v", c.in, c.dbType, got, c.want)
		}
	}
}

// TestKeyValues: keys are bound again as the driver takes them, and a
// receiver's {"failed": […]} matches them whatever JSON type it used.
func TestKeyValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in     any
		dbType string
		want   any
	}{
		{[]byte("9"), "BIGINT", int64(9)},
		{int32(9), "INT4", int64(9)},
		{int(9), "INT", int64(9)},
		{[]byte("1.5"), "NUMERIC", "1.5"},
		{[]byte("k-1"), "BINARY", "k-1"},
		{"k-1", "TEXT", "k-1"},
	} {
		if got := keyValue(c.in, c.dbType); !reflect.DeepEqual(got, c.want) {
			t.Errorf("keyValue(%#v, %s) = %#v, want %#v", c.in, c.dbType, got, c.want)
		}
	}
	for in, want := range map[any]string{
		int64(9): "9", "9": "9", json.Number("9"): "9", float64(9): "9", float64(2.5): "2.5", uint64(7): "7",
	} {
		if got := keyString(in); got != want {
			t.Errorf("keyString(%#v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[any]int64{int64(3): 3, json.Number("4"): 4, float64(5): 5, "6": 6, nil: 0} {
		if got, ok := toInt(in); !ok || got != want {
			t.Errorf("toInt(%#v) = %d %v", in, got, ok)
		}
	}
	if _, ok := toInt([]int{1}); ok {
		t.Error("toInt took a slice")
	}
}

// TestRealClock: the default clock's timers, tickers and AfterFuncs fire.
func TestRealClock(t *testing.T) {
	t.Parallel()
	var c Clock = realClock{}
	if c.Now().IsZero() {
		t.Fatal("zero now")
	}
	tm := c.NewTimer(time.Hour)
	tm.Reset(time.Millisecond)
	<-tm.C()
	tm.Stop()
	tk := c.NewTicker(time.Hour)
	tk.Reset(time.Millisecond)
	<-tk.C()
	<-tk.C()
	tk.Stop()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
}
