package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

// patchFlags are the fields `update` and `key update` may change.
type patchFlags struct {
	in, at, target, data string
	maxAttempts          int
}

func (pf *patchFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&pf.in, "in", "", "new due time as a delay from now, e.g. 30s, 1h30m")
	f.StringVar(&pf.at, "at", "", "new due time, RFC 3339 (2026-11-23T18:00:00Z)")
	f.StringVar(&pf.target, "target", "", "new webhook URL or mq://BROKER/ADDRESS (\"\": the topic's Go handler)")
	f.StringVar(&pf.data, "data", "", "new payload JSON, or @file to read it from a file")
	f.IntVar(&pf.maxAttempts, "max-attempts", 0, "new attempts before the task is dead")
}

// patch builds the request from the flags given on the command line.
func (pf *patchFlags) patch(cmd *cobra.Command) (client.TaskPatch, error) {
	var p client.TaskPatch
	f := cmd.Flags()
	switch {
	case f.Changed("in") && f.Changed("at"):
		return p, usagef("give --in or --at, not both")
	case f.Changed("in"):
		if _, err := time.ParseDuration(pf.in); err != nil {
			return p, usagef("--in: %q is not a duration such as 30s or 1h30m", pf.in)
		}
		p.Delay = &pf.in
	case f.Changed("at"):
		if _, err := time.Parse(time.RFC3339Nano, pf.at); err != nil {
			return p, usagef("--at: %q is not an RFC 3339 time such as 2026-11-23T18:00:00Z", pf.at)
		}
		p.DueAt = &pf.at
	}
	if f.Changed("target") {
		p.Target = &pf.target
	}
	if f.Changed("max-attempts") {
		if pf.maxAttempts < 1 {
			return p, usagef("--max-attempts: %d; at least 1", pf.maxAttempts)
		}
		p.MaxAttempts = &pf.maxAttempts
	}
	if f.Changed("data") {
		raw, err := readData(pf.data)
		if err != nil {
			return p, err
		}
		p.Payload = raw
	}
	if p.DueAt == nil && p.Delay == nil && p.Payload == nil && p.Target == nil && p.MaxAttempts == nil {
		return p, usagef("nothing to change: give any of --in, --at, --data, --target, --max-attempts")
	}
	return p, nil
}

func newUpdateCmd(g *globals) *cobra.Command {
	var (
		pf patchFlags
		p  client.TaskPatch
	)
	cmd := &cobra.Command{
		Use:   "update TASK_ID [flags]",
		Short: "Reschedule or change a pending task",
		Long: `Change a task that is pending or claimed: its due time (--in or --at), payload,
target or max attempts; the flags not given stay as they are. A task moved
later is never delivered at its old time; one moved earlier is delivered at
its new time, never before. A task that is running, done, dead or cancelled
cannot be changed (exit code 4).`,
		Example: `  ontime update 01JD5Q5H0C8Y2X4ZV7M3N9P6RT --in 2h
  ontime update 01JD5Q5H0C8Y2X4ZV7M3N9P6RT --data '{"order": 43}' --max-attempts 5`,
		Args:              exactArgs(1, "task ID"),
		ValidArgsFunction: g.completeTaskIDs,
		PreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			p, err = pf.patch(cmd)
			return err
		},
		RunE: runOne(g, func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
			return c.Update(ctx, id, p)
		}, noErr(printTask)),
	}
	pf.register(cmd)
	return cmd
}

func newKeyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Get, cancel or change the task a key names",
		Long: `A key names at most one live task (pending, claimed, running) in its topic.
These verbs address that task by its topic and key; when the key has no live
task, the one that ended last (get shows it, cancel of a cancelled task shows
it again, anything else is a conflict, exit code 4). A key no task has is
exit code 3.`,
		Example: `  ontime key get order.cancel order-42
  ontime key update order.cancel order-42 --in 1h
  ontime key cancel order.cancel order-42`,
		Args: noArgs,
	}
	byKey := func(use, short, example string, pf *patchFlags, call func(cmd *cobra.Command, c *client.Client, topic, key string) (*client.Task, error)) *cobra.Command {
		sub := &cobra.Command{
			Use:     use + " TOPIC KEY",
			Short:   short,
			Long:    short + ". " + cmd.Long,
			Example: example,
			Args:    exactArgs(2, "arguments (TOPIC KEY)"),
			RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, args []string) (*client.Task, error) {
				return call(cmd, c, args[0], args[1])
			}, noErr(printTask)),
		}
		if pf != nil {
			pf.register(sub)
		}
		return sub
	}
	var pf patchFlags
	cmd.AddCommand(
		byKey("get", "Show the task a key names", "  ontime key get order.cancel order-42 --json | jq .status", nil, func(cmd *cobra.Command, c *client.Client, topic, key string) (*client.Task, error) {
			return c.GetByKey(cmd.Context(), topic, key)
		}),
		byKey("cancel", "Cancel the live task a key names", "  ontime key cancel order.cancel order-42", nil, func(cmd *cobra.Command, c *client.Client, topic, key string) (*client.Task, error) {
			return c.CancelByKey(cmd.Context(), topic, key)
		}),
		byKey("update", "Reschedule or change the live task a key names",
			"  ontime key update order.cancel order-42 --in 1h\n  ontime key update order.cancel order-42 --data '{\"order\": 42, \"v\": 2}'", &pf, func(cmd *cobra.Command, c *client.Client, topic, key string) (*client.Task, error) {
				p, err := pf.patch(cmd)
				if err != nil {
					return nil, err
				}
				return c.UpdateByKey(cmd.Context(), topic, key, p)
			}),
	)
	return cmd
}
