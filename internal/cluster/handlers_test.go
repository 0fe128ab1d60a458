package cluster

import (
	"slices"
	"testing"
)

// Handlers maps topics to the live nodes that handle them, sorted, and is
// loaded from its first Set; a membership value of an earlier version (a
// bare address) reads as a node without topics.
func TestHandlers(t *testing.T) {
	h := NewHandlers()
	select {
	case <-h.Loaded():
		t.Fatal("loaded before the first Set")
	default:
	}
	h.Set(map[string][]string{"c": {"orders"}, "a": {"orders", "mail"}, "b": nil})
	<-h.Loaded()
	if got := h.Nodes("orders"); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("orders: %v", got)
	}
	if got := h.Nodes("nobody"); got != nil {
		t.Fatalf("nobody: %v", got)
	}
	h.Set(map[string][]string{"a": {"mail"}})
	if h.Nodes("orders") != nil || !slices.Equal(h.Nodes("mail"), []string{"a"}) {
		t.Fatalf("after a node left: orders %v mail %v", h.Nodes("orders"), h.Nodes("mail"))
	}
	m := Member{Addr: "10.0.0.1:7070", Topics: []string{"orders"}}
	if got := DecodeMember(EncodeMember(m)); got.Addr != m.Addr || !slices.Equal(got.Topics, m.Topics) {
		t.Fatalf("round trip: %+v", got)
	}
	if got := DecodeMember("10.0.0.2:7070"); got.Addr != "10.0.0.2:7070" || got.Topics != nil {
		t.Fatalf("an earlier version's value: %+v", got)
	}
}
