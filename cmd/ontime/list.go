package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

// statuses are the task statuses, for --status and its completion.
var statuses = []cobra.Completion{"pending", "claimed", "running", "done", "dead", "cancelled"}

// oneOf checks a flag whose value is one of a fixed set ("" when not
// given): another value is a usage error (exit 2) here, not a 400 from the
// server (exit 1).
func oneOf(flag, v string, choices []cobra.Completion) error {
	if v == "" || slices.Contains(choices, v) {
		return nil
	}
	return usagef("%s: %q is not one of %s", flag, v, strings.Join(choices, ", "))
}

func newListCmd(g *globals) *cobra.Command {
	var o client.ListOptions
	cmd := &cobra.Command{
		Use:   "list [flags]",
		Short: "List tasks",
		Long: `List tasks in creation order, a page at a time. When there is more, the last
line gives the --cursor of the next page.`,
		Example: `  ontime list --status dead
  ontime list --topic order.cancel --limit 200
  ontime list --json | jq -r '.tasks[].id'`,
		Args: noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if o.Limit < 1 || o.Limit > 1000 {
				return usagef("--limit: %d is out of range 1..1000", o.Limit)
			}
			return oneOf("--status", o.Status, statuses)
		},
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) (*client.ListPage, error) {
			return c.List(cmd.Context(), o)
		}, func(out io.Writer, page *client.ListPage) error {
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTOPIC\tKEY\tSTATUS\tDUE\tATTEMPTS\tLAST ERROR")
			for _, t := range page.Tasks {
				last := []rune(t.LastError)
				if len(last) > 40 {
					last = append(last[:40], '…')
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Topic, t.Key, t.Status, t.DueAt.Local().Format(time.DateTime), t.Attempts, t.MaxAttempts, string(last))
			}
			tw.Flush()
			if page.NextCursor != "" {
				fmt.Fprintf(out, "more: --cursor %s\n", page.NextCursor)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.Topic, "topic", "", "only this topic")
	f.StringVar(&o.Status, "status", "", "only this status: pending, claimed, running, done, dead, cancelled")
	f.IntVar(&o.Limit, "limit", 50, "tasks per page (1..1000)")
	f.StringVar(&o.Cursor, "cursor", "", "continue after this cursor (printed at the end of a page)")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
