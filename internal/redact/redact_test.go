package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
)

func TestHandlerMasksEverywhere(t *testing.T) {
	t.Parallel()
	const pw = "p@ss w0rd/secret"
	r := New(pw, "abc", "", "token-0123456789abcdef")
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	dsn := "postgres://u:" + pw + "@db:5432/x"
	log.With("dsn", dsn).WithGroup("g").Info("connect "+dsn,
		"err", fmt.Errorf("dial %s: %w", dsn, fs.ErrNotExist),
		"url", "redis://:p%40ss+w0rd%2Fsecret@h:6379",
		"list", []string{"Bearer token-0123456789abcdef"},
		slog.Group("inner", "v", pw), "n", 42, "short", "abc")
	out := buf.String()
	for _, s := range []string{pw, "p%40ss+w0rd%2Fsecret", "token-0123456789abcdef"} {
		if strings.Contains(out, s) {
			t.Errorf("%q in %s", s, out)
		}
	}
	if strings.Count(out, Mask) != 6 || !strings.Contains(out, `"short":"abc"`) || !strings.Contains(out, `"n":42`) {
		t.Errorf("log line %s", out)
	}
	err := r.Error(fmt.Errorf("open %s: %w", dsn, fs.ErrNotExist))
	if strings.Contains(err.Error(), pw) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v", err)
	}
}

func TestDSNPasswords(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://app:s3cr3t@db/x": "s3cr3t",
		// libpq's multi-host forms (a primary and its replicas).
		"postgres://app:s3cr3t@a:5432,b:5432/x?target_session_attrs=read-write": "s3cr3t",
		"host=a,b port=5432,5433 user=app password=s3cr3t dbname=x":             "s3cr3t",
		"host=db user=app password='s3cr3t' dbname=x":                           "s3cr3t",
		"app:s3cr3t@tcp(db:3306)/x?parseTime=true":                              "s3cr3t",
		"file:/data/ontime.db?_pragma=busy_timeout(10)":                         "",
	} {
		if got := strings.Join(DSNPasswords(dsn), ","); got != want {
			t.Errorf("%s: %q, want %q", dsn, got, want)
		}
	}
}
