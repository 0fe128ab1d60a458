package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ontimehq/ontime/client"
)

// runSubmit: ontime submit --topic T [--key K] (--in 30s | --at TIME)
// [--target URL] [--data JSON | --data @file] [--max-attempts N]
func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("submit")
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "topic (required)")
	key := fs.String("key", "", "idempotency and shard key")
	in := fs.String("in", "", "delay from now, e.g. 30s, 1h30m")
	at := fs.String("at", "", "due time, RFC 3339 (2026-11-23T18:00:00Z)")
	target := fs.String("target", "", "webhook URL (empty: the topic's Go handler)")
	data := fs.String("data", "", "payload JSON, or @file")
	maxAttempts := fs.Int("max-attempts", 0, "attempts before the task is dead (default: server's)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return fail(stderr, "submit", 2, err)
	}
	if len(pos) > 0 {
		return fail(stderr, "submit", 2, fmt.Errorf("unexpected argument %q", pos[0]))
	}
	if *topic == "" {
		return fail(stderr, "submit", 2, errors.New("--topic is required"))
	}
	req := client.TaskRequest{Topic: *topic, Key: *key, Target: *target, MaxAttempts: *maxAttempts}
	switch {
	case *in != "" && *at != "":
		return fail(stderr, "submit", 2, errors.New("give --in or --at, not both"))
	case *in != "":
		if _, err := time.ParseDuration(*in); err != nil {
			return fail(stderr, "submit", 2, fmt.Errorf("--in: %q is not a duration such as 30s", *in))
		}
		req.Delay = *in
	case *at != "":
		if _, err := time.Parse(time.RFC3339Nano, *at); err != nil {
			return fail(stderr, "submit", 2, fmt.Errorf("--at: %q is not an RFC 3339 time such as 2026-11-23T18:00:00Z", *at))
		}
		req.DueAt = *at
	}
	if *data != "" {
		raw := []byte(*data)
		if strings.HasPrefix(*data, "@") {
			raw, err = os.ReadFile(strings.TrimPrefix(*data, "@"))
			if err != nil {
				return fail(stderr, "submit", 2, fmt.Errorf("--data: %w", err))
			}
		}
		if !json.Valid(raw) {
			return fail(stderr, "submit", 2, errors.New("--data: not valid JSON"))
		}
		req.Payload = raw
	}
	c, err := cf.client()
	if err != nil {
		return fail(stderr, "submit", 2, err)
	}
	t, created, err := c.Submit(ctx, req)
	if err != nil {
		return fail(stderr, "submit", 1, err)
	}
	if cf.json {
		printTask(stdout, true, t)
		return 0
	}
	verb := "submitted"
	if !created {
		verb = "exists already (same topic and key)"
	}
	fmt.Fprintf(stdout, "%s %s, due %s (%s)\n", t.ID, verb, t.DueAt.Local().Format(time.RFC3339), relative(t.DueAt))
	return 0
}
