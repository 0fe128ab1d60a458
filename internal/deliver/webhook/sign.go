package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/deliver"
)

// Signatures: Ontime-Signature: t=<unix seconds>,v2=<hex>[,v2=<hex>…][,v1=<hex>]
//
// v2 is HMAC-SHA256(secret, t + "." + target + "." + body), where target is
// the task's target URL exactly as submitted. Binding the target means a
// signed call captured at one receiver (a submitter can point a task at a
// server of its own) is worthless at any other receiver sharing the secret.
// During a key rotation the call carries one v2 per valid secret, newest
// first, and a receiver accepts any secret it knows: new and old are valid
// at once. v1 (without the target) is sent only with delivery.signature_v1,
// for receivers not yet moved to v2.

// Keyring picks the secrets that sign a delivery: the first entry whose
// topic glob or destination matches, else the global secrets.
type Keyring struct {
	Global  []string // newest first; empty: calls are unsigned
	Entries []KeyEntry
	// V1 also sends the v1 signature, made with the first secret.
	V1 bool
}

// KeyEntry is a secret for some topics or one destination.
type KeyEntry struct {
	Topics      string   // topic glob ("orders.*"); "" matches any topic
	Destination string   // scheme://host[:port] as deliver.Destination gives it; "" matches any
	Secrets     []string // newest first
}

// ValidateEntry checks an entry; key names it in errors.
func ValidateEntry(key string, e KeyEntry) error {
	if e.Topics == "" && e.Destination == "" {
		return fmt.Errorf("%s: give topics or destination", key)
	}
	if _, err := path.Match(e.Topics, ""); err != nil {
		return fmt.Errorf("%s.topics: %q is not a glob", key, e.Topics)
	}
	if len(e.Secrets) == 0 {
		return fmt.Errorf("%s: no secret", key)
	}
	return nil
}

// For returns the secrets for a delivery of topic to target.
func (k *Keyring) For(topic, target string) []string {
	if k == nil {
		return nil
	}
	dest := ""
	for _, e := range k.Entries {
		if e.Destination != "" {
			if dest == "" {
				dest = strings.ToLower(deliver.Destination(target))
			}
			if !strings.EqualFold(e.Destination, dest) {
				continue
			}
		}
		if e.Topics != "" {
			if ok, _ := path.Match(e.Topics, topic); !ok {
				continue
			}
		}
		return e.Secrets
	}
	return k.Global
}

// Sign returns the Ontime-Signature value for body sent to target at t,
// one v2 per secret (and v1 with the first when v1 is set).
func Sign(secrets []string, t time.Time, target string, body []byte, v1 bool) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		b.WriteString(",v2=" + hex.EncodeToString(macV2(s, ts, target, body)))
	}
	if v1 && len(secrets) > 0 {
		b.WriteString(",v1=" + hex.EncodeToString(macV1(secrets[0], ts, body)))
	}
	return b.String()
}

func macV2(secret, ts, target string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write([]byte(target))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

func macV1(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// ErrBadSignature is wrapped by every Verify failure.
var ErrBadSignature = errors.New("bad webhook signature")

// Verify checks an Ontime-Signature header's v2 signatures against the
// raw body and the URL the receiver is known by (the task's target, as
// submitted), accepting any of secrets (the new and the old one during a
// rotation), and rejects timestamps further than tolerance from now
// (replays). Comparisons are constant-time; v1 is not accepted.
func Verify(header, target string, body []byte, now time.Time, tolerance time.Duration, secrets ...string) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v2":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: header lacks t= or v2=", ErrBadSignature)
	}
	if len(secrets) == 0 {
		return fmt.Errorf("%w: no secret to verify with", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp is %s away from now", ErrBadSignature, d.Round(time.Second))
	}
	ok := 0
	for _, secret := range secrets {
		want := macV2(secret, ts, target, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				ok = 1
			}
		}
	}
	if ok == 0 {
		return fmt.Errorf("%w: no v2 signature matches", ErrBadSignature)
	}
	return nil
}
