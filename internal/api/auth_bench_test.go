package api

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthenticate is the cost the token check adds to a request,
// with 10 tokens configured (each compared, in constant time).
func BenchmarkAuthenticate(b *testing.B) {
	var toks []Token
	for i := range 10 {
		toks = append(toks, Token{Name: fmt.Sprint("t", i), Secret: fmt.Sprintf("token-%02d-0123456789abcdef", i), Role: RoleWrite})
	}
	a, err := NewAuth(toks)
	if err != nil {
		b.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/tasks", nil)
	r.Header.Set("Authorization", "Bearer token-07-0123456789abcdef")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.authenticate(w, r); err != nil {
			b.Fatal(err)
		}
	}
}
