package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

func newGetCmd(g *globals) *cobra.Command {
	return taskVerb(g, taskVerbSpec{
		use:   "get TASK_ID",
		short: "Show a task",
		long: `Show a task: its status, the due time of its next attempt and, when it moved,
the time it was first due and what moved it (a retry, an update, a requeue),
attempts, target, payload and last error.`,
		example: `  ontime get 01JD5Q5H0C8Y2X4ZV7M3N9P6RT
  ontime get 01JD5Q5H0C8Y2X4ZV7M3N9P6RT --json | jq .status`,
		call: func(ctx context.Context, c *client.Client, id string) (*client.Task, error) { return c.Get(ctx, id) },
	})
}

func newCancelCmd(g *globals) *cobra.Command {
	return taskVerb(g, taskVerbSpec{
		use:   "cancel TASK_ID",
		short: "Cancel a pending task",
		long: `Cancel a task that is pending or claimed: it will not be delivered. A task
that is running, done or dead cannot be cancelled (exit code 4).`,
		example: `  ontime cancel 01JD5Q5H0C8Y2X4ZV7M3N9P6RT`,
		call:    func(ctx context.Context, c *client.Client, id string) (*client.Task, error) { return c.Cancel(ctx, id) },
	})
}

func newRequeueCmd(g *globals) *cobra.Command {
	return taskVerb(g, taskVerbSpec{
		use:   "requeue TASK_ID",
		short: "Return a dead task to pending",
		long: `Return a dead task (one that used all its attempts) to pending, due now, with
a fresh set of attempts. Any other status is a conflict (exit code 4).`,
		example: `  ontime list --status dead
  ontime requeue 01JD5Q5H0C8Y2X4ZV7M3N9P6RT`,
		call: func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
			return c.Requeue(ctx, id)
		},
	})
}

func newPurgeCmd(g *globals) *cobra.Command {
	return taskVerb(g, taskVerbSpec{
		use:   "purge TASK_ID",
		short: "Delete a done, dead or cancelled task now",
		long: `Delete a final task (done, dead or cancelled) now rather than when its
retention ends, and print it as it was. Its key is free at once. A live task
is a conflict (exit code 4): cancel it first. Needs an admin token.`,
		example: `  ontime list --status dead
  ontime purge 01JD5Q5H0C8Y2X4ZV7M3N9P6RT`,
		call: func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
			return c.Purge(ctx, id)
		},
	})
}

type taskVerbSpec struct {
	use, short, long, example string
	call                      func(ctx context.Context, c *client.Client, id string) (*client.Task, error)
}

// taskVerb makes a verb that takes one task ID and prints the task.
func taskVerb(g *globals, s taskVerbSpec) *cobra.Command {
	return &cobra.Command{
		Use:               s.use,
		Short:             s.short,
		Long:              s.long,
		Example:           s.example,
		Args:              exactArgs(1, "task ID"),
		ValidArgsFunction: g.completeTaskIDs,
		RunE:              runOne(g, s.call, noErr(printTask)),
	}
}

// completeTaskIDs offers the IDs of the newest page of tasks on the server.
func (g *globals) completeTaskIDs(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := g.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	page, err := c.List(cmd.Context(), client.ListOptions{Limit: 100})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []cobra.Completion
	for _, t := range page.Tasks {
		ids = append(ids, cobra.CompletionWithDesc(t.ID, t.Topic+" "+t.Status))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
