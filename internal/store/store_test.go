package store_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ontimehq/ontime/internal/store"
)

func TestErrorTextValidAndBounded(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"invalid bytes":            "bad \xff\xfe reply",
		"cut inside a 2-byte char": strings.Repeat("a", store.MaxErrorBytes-1) + "é tail",
		"cut inside a 4-byte char": strings.Repeat("a", store.MaxErrorBytes-2) + "😀 tail",
		"long invalid":             strings.Repeat("\xff", 3*store.MaxErrorBytes),
		"short valid":              "503 Service Unavailable",
	}
	for name, in := range cases {
		out := store.ErrorText(in)
		if !utf8.ValidString(out) {
			t.Errorf("%s: %q is not valid UTF-8", name, out)
		}
		if len(out) > store.MaxErrorBytes {
			t.Errorf("%s: %d bytes, more than %d", name, len(out), store.MaxErrorBytes)
		}
	}
	if got := store.ErrorText("503 Service Unavailable"); got != "503 Service Unavailable" {
		t.Errorf("valid short text changed: %q", got)
	}
	if got := store.ErrorText(strings.Repeat("a", store.MaxErrorBytes-1) + "é"); got != strings.Repeat("a", store.MaxErrorBytes-1) {
		t.Errorf("cut inside é: got %d bytes ending %q", len(got), got[len(got)-3:])
	}
}

// TestIncarnationTokens: an incarnation's tokens carry its ID, fall in its
// range and are distinct; NewToken's carry none.
func TestIncarnationTokens(t *testing.T) {
	a, b := store.NewIncarnation(), store.NewIncarnation()
	seen := map[int64]bool{}
	for range 10000 {
		tok := a.Token()
		lo, hi := store.IncarnationTokens(a.ID())
		if tok <= 0 || tok < lo || tok > hi || store.TokenIncarnation(tok) != a.ID() || seen[tok] {
			t.Fatalf("token %d of incarnation %d (range %d..%d, seen %v)", tok, a.ID(), lo, hi, seen[tok])
		}
		seen[tok] = true
		if u := store.NewToken(); u <= 0 || u >= store.AttributedTokens || store.TokenIncarnation(u) != 0 {
			t.Fatalf("unattributed token %d", u)
		}
	}
	for b.ID() == a.ID() { // one chance in 8 million
		b = store.NewIncarnation()
	}
	if lo, hi := store.IncarnationTokens(b.ID()); store.TokenIncarnation(lo) != b.ID() || store.TokenIncarnation(hi) != b.ID() {
		t.Fatalf("range of %d: %d..%d", b.ID(), lo, hi)
	}
}
