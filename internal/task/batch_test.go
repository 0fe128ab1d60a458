package task

import (
	"errors"
	"testing"
	"time"
)

// A batch judges each run of equal targets once and gives every task of
// the run the same verdict as Validate gives it alone.
func TestBatchJudgesATargetOnce(t *testing.T) {
	var asked []string
	l := Limits{CheckTarget: func(target string) error {
		asked = append(asked, target)
		if target == "http://denied.example/x" {
			return errors.New("denied by the delivery policy")
		}
		return nil
	}}
	now := time.Now()
	specs := []Spec{
		{Topic: "a", Target: "http://ok.example/x"},
		{Topic: "a", Target: "http://ok.example/x"},
		{Topic: "a", Target: "http://denied.example/x"},
		{Topic: "a", Target: "http://denied.example/x"},
		{Topic: "a", Target: "mailto:x@y"},
		{Topic: "a", Target: "mailto:x@y"},
		{Topic: "a", Target: "http://ok.example/x"},
		{Topic: "a", Target: "http://ok.example/x", Payload: []byte(`{`)},
		{Topic: "a", Target: "http://ok.example/x", Payload: []byte(`{`), PayloadValid: true},
	}
	b := NewBatch(l, now)
	var got []error
	for _, s := range specs {
		_, err := b.Validate(s)
		got = append(got, err)
	}
	if want := []string{"http://ok.example/x", "http://denied.example/x", "http://ok.example/x"}; len(asked) != len(want) {
		t.Fatalf("policy asked about %q, want %q", asked, want)
	}
	asked = nil
	for i, s := range specs {
		_, alone := Validate(s, l, now)
		if (alone == nil) != (got[i] == nil) || alone != nil && alone.Error() != got[i].Error() {
			t.Errorf("spec %d: batch %v, alone %v", i, got[i], alone)
		}
		var fe *FieldError
		if got[i] != nil && (!errors.As(got[i], &fe) || fe.Field != map[bool]string{true: "target", false: "payload"}[i < 7]) {
			t.Errorf("spec %d: %v is not a field error on the right field", i, got[i])
		}
	}
	for i, refused := range []bool{false, false, true, true, true, true, false, true, false} {
		if (got[i] != nil) != refused {
			t.Errorf("spec %d: error %v, want refused %v", i, got[i], refused)
		}
	}
}
