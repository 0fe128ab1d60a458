package webhook

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The receiver recipes of README "Security" (docs/verify/verify.py and
// verify.js) accept what Sign produces and refuse what they must: the
// same body for another target, a tampered body, a wrong secret, a stale
// timestamp. python3 and node are required (standard libraries only).
func TestReceiverSnippets(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "docs", "verify"))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"01jd0000000000000000000000","topic":"orders.cancel","key":"k","payload":{"n":"é"},"due_at":"2026-11-23T10:00:00Z","attempt":1}`)
	target := "https://shop.example/hooks/cancel?tenant=7"
	now := time.Now()
	rotating := Sign([]string{"new-secret", "old-secret"}, now, target, body, true)
	oldOnly := Sign([]string{"old-secret"}, now, target, body, false)
	stale := Sign([]string{"new-secret"}, now.Add(-time.Hour), target, body, false)
	cases := []struct {
		name, header, target string
		body                 []byte
		secrets              []string
		valid                bool
	}{
		{"rotating, receiver knows the new", rotating, target, body, []string{"new-secret"}, true},
		{"rotating, receiver knows the old", rotating, target, body, []string{"old-secret"}, true},
		{"old signature, receiver knows both", oldOnly, target, body, []string{"new-secret", "old-secret"}, true},
		{"another target", rotating, "https://shop.example/hooks/refund?tenant=7", body, []string{"new-secret"}, false},
		{"tampered body", rotating, target, append(bytes.Clone(body), ' '), []string{"new-secret"}, false},
		{"wrong secret", rotating, target, body, []string{"guess"}, false},
		{"stale", stale, target, body, []string{"new-secret"}, false},
	}
	for _, run := range []struct{ lang, bin, file string }{{"python", "python3", "verify.py"}, {"node", "node", "verify.js"}} {
		for _, tc := range cases {
			// The Go verifier agrees with the recipe on every case.
			if goErr := Verify(tc.header, tc.target, tc.body, time.Now(), 5*time.Minute, tc.secrets...); (goErr == nil) != tc.valid {
				t.Fatalf("%s: Go Verify says %v", tc.name, goErr)
			}
			args := append([]string{filepath.Join(dir, run.file), tc.header, tc.target}, tc.secrets...)
			cmd := exec.Command(run.bin, args...)
			cmd.Stdin = bytes.NewReader(tc.body)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			switch {
			case err == nil && !tc.valid:
				t.Errorf("%s %s: accepted", run.lang, tc.name)
			case err != nil && tc.valid:
				t.Errorf("%s %s: refused: %v %s", run.lang, tc.name, err, out)
			case err != nil && !errors.As(err, &ee):
				t.Fatalf("%s is required: %v", run.bin, err)
			case err != nil && ee.ExitCode() != 1:
				t.Errorf("%s %s: exit %d %s", run.lang, tc.name, ee.ExitCode(), out)
			}
		}
	}
}
