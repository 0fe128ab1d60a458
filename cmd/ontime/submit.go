package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

func newSubmitCmd(g *globals) *cobra.Command {
	var (
		req   client.TaskRequest
		in    string
		at    string
		data  string
		repl  bool
		retry retryFlags
		prio  int
	)
	cmd := &cobra.Command{
		Use:   "submit --topic TOPIC [flags]",
		Short: "Submit a task",
		Long: `Submit a task, due after --in or at --at (now when neither is given).

With --key, the key names at most one live task in its topic: submitting it
again returns the existing task and writes nothing ("exists already"), or
with --replace updates it. A task that ended (done, dead, cancelled) holds
its key retention.key_hold (10m) more: a submit meanwhile writes nothing and
exits 4 saying until when; --replace makes a new task at once.
--target is a webhook URL (http:// or https://), mq://BROKER/ADDRESS, or
empty: the topic's default target (topics.NAME.target in the config), else
a Go handler for the topic on a live node; with neither, the task is
refused (no node could deliver it). The --retry-* flags give the task a
retry policy of its own (else its topic's, else the node's).`,
		Example: `  ontime submit --topic order.cancel --key order-42 --in 30m \
      --target https://shop.example/hooks/cancel --data '{"order": 42}'
  ontime submit --topic report.daily --at 2026-11-24T06:00:00Z --data @payload.json \
      --target https://reports.example/hooks/daily
  ontime submit --topic t --in 1h --target https://example.com/hook --json | jq -r .id
  ontime submit --topic t --target https://example.com/hook --retry-schedule 10s,1m,10m,1h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Topic == "" {
				return usagef("--topic is required")
			}
			switch {
			case in != "" && at != "":
				return usagef("give --in or --at, not both")
			case in != "":
				if _, err := time.ParseDuration(in); err != nil {
					return usagef("--in: %q is not a duration such as 30s or 1h30m", in)
				}
				req.Delay = in
			case at != "":
				if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
					return usagef("--at: %q is not an RFC 3339 time such as 2026-11-23T18:00:00Z", at)
				}
				req.DueAt = at
			}
			if req.MaxAttempts < 0 {
				return usagef("--max-attempts: %d; at least 1", req.MaxAttempts)
			}
			if cmd.Flags().Changed("priority") {
				if prio < 0 || prio > 9 {
					return usagef("--priority: %d; want 0 to 9", prio)
				}
				req.Priority = &prio
			}
			if data != "" {
				raw, err := readData(data)
				if err != nil {
					return err
				}
				req.Payload = raw
			}
			if repl {
				req.IfExists = "replace"
			}
			req.Retry = retry.policy(cmd)
			c, err := g.client()
			if err != nil {
				return err
			}
			t, created, err := c.Submit(cmd.Context(), req)
			if err != nil {
				return err
			}
			if t.KeyHeldUntil != nil {
				// Nothing was written and nothing will be delivered for
				// this submit: a failure, whatever the output format.
				if g.json {
					if err := g.printJSON(cmd, t); err != nil {
						return err
					}
				}
				return failf(exitConflict, "key %q of topic %s is held by %s task %s until %s (%s): nothing submitted; --replace makes a new task now",
					t.Key, t.Topic, t.Status, t.ID, t.KeyHeldUntil.Local().Format(time.RFC3339), relative(*t.KeyHeldUntil))
			}
			if g.json {
				return g.printJSON(cmd, t)
			}
			verb := "submitted"
			if !created {
				verb = "exists already (same topic and key)"
				if repl && (t.Status == "pending" || t.Status == "claimed") {
					verb = "replaced (same topic and key)"
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s, due %s (%s)\n", t.ID, verb, t.DueAt.Local().Format(time.RFC3339), relative(t.DueAt))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Topic, "topic", "", "topic (required): 1-64 of A-Z a-z 0-9 _ . -")
	f.StringVar(&req.Key, "key", "", "key: at most one live task per topic and key; also the shard key")
	f.StringVar(&in, "in", "", "delay from now, e.g. 30s, 1h30m")
	f.StringVar(&at, "at", "", "due time, RFC 3339 (2026-11-23T18:00:00Z)")
	f.StringVar(&req.Target, "target", "", "webhook URL or mq://BROKER/ADDRESS (empty: the topic's default target, else its Go handler)")
	f.StringVar(&data, "data", "", "payload JSON, or @file to read it from a file")
	f.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts before the task is dead (default: the server's)")
	retry.add(cmd)
	f.IntVar(&prio, "priority", 0, "0 (lowest) to 9: orders the task among those due at once (default: the topic's, else 0)")
	f.BoolVar(&repl, "replace", false, "when the key names a live task, update it with these fields; when a final task holds it, make a new task (if_exists: replace)")
	_ = cmd.RegisterFlagCompletionFunc("in", cobra.FixedCompletions([]cobra.Completion{"30s", "5m", "1h", "24h"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
