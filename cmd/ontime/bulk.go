package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// bulkFlags are the filter and the due-time flags of `ontime bulk ACTION`.
type bulkFlags struct {
	topic, keyPrefix, dueAfter, dueBefore, errContains string
	status                                             []string
	at, in, shift                                      string
	dryRun, noWait                                     bool
}

func newBulkCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bulk",
		Short: "Cancel, requeue, reschedule or delete every task a filter matches",
		Long: `Start a bulk operation on the node: one change applied to every task the
filter matches (at least one filter flag is required), in pages of
operations.page_size rows, each page one short transaction, so millions of
tasks never lock a table; an operation cut short by a crash resumes where it
was on another node, every matching task changed once. Only tasks created
before the operation are touched.

  cancel      pending and claimed tasks (as ontime cancel)
  requeue     dead tasks back to pending, attempts reset (--at/--in: when)
  reschedule  pending tasks: --at TIME, --in DURATION or --shift ±DURATION
  delete      pending, done, dead and cancelled tasks

The verb waits for the end, with a progress bar on a terminal's stderr
(--no-wait: print the operation's ID and return). --dry-run counts what would
change and changes nothing.`,
		Example: `  ontime bulk requeue --topic order.cancel --status dead --error-contains "HTTP 503" --dry-run
  ontime bulk cancel --topic order.cancel --key-prefix tenant-7: --due-before 2030-01-01T00:00:00Z
  ontime bulk reschedule --topic report.nightly --shift 2h
  ontime bulk delete --topic order.cancel --status done --no-wait
  ontime bulk status 01JD5Q5H0C8Y2X4ZV7M3N9P6RT
  ontime bulk list`,
		Args: noArgs,
	}
	for _, a := range []struct{ action, short, example string }{
		{"cancel", "Cancel the pending and claimed tasks a filter matches",
			`  ontime bulk cancel --topic order.cancel --key-prefix tenant-7: --dry-run
  ontime bulk cancel --topic order.cancel --due-before 2030-01-01T00:00:00Z`},
		{"requeue", "Return the dead tasks a filter matches to pending",
			`  ontime bulk requeue --topic order.cancel --error-contains "HTTP 503"
  ontime bulk requeue --status dead --topic order.cancel --in 10m`},
		{"reschedule", "Move the due time of the pending tasks a filter matches",
			`  ontime bulk reschedule --topic report.nightly --shift 2h
  ontime bulk reschedule --topic order.cancel --key-prefix tenant-7: --at 2030-01-01T09:00:00Z`},
		{"delete", "Delete the pending and final tasks a filter matches",
			`  ontime bulk delete --topic order.cancel --status done,cancelled
  ontime bulk delete --topic test.load --no-wait`},
	} {
		c := bulkAction(g, a.action, a.short)
		c.Example = a.example
		cmd.AddCommand(c)
	}
	var wait bool
	status := &cobra.Command{
		Use:     "status ID",
		Short:   "Show a bulk operation's progress",
		Example: `  ontime bulk status 01JD5Q5H0C8Y2X4ZV7M3N9P6RT --wait`,
		Args:    exactArgs(1, "operation ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			op, err := c.Operation(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if wait {
				if op, err = waitOperation(cmd.Context(), c, op, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			return printOperation(g, cmd, op)
		},
	}
	status.Flags().BoolVar(&wait, "wait", false, "wait for its end, with a progress bar")
	var limit int
	list := &cobra.Command{
		Use:     "list",
		Short:   "List bulk operations, newest first",
		Example: `  ontime bulk list --limit 10`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if limit < 1 || limit > 500 {
				return usagef("--limit: %d is out of range 1..500", limit)
			}
			return nil
		},
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) ([]apiv1.Operation, error) {
			return c.Operations(cmd.Context(), limit)
		}, noErr(func(w io.Writer, ops []apiv1.Operation) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTION\tSTATE\tMATCHED\tCHANGED\tTABLES\tCREATED")
			for _, op := range ops {
				action := op.Action
				if op.DryRun {
					action += " (dry run)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\n", op.ID, action, op.Status, op.Matched, op.Changed, op.TablesDone, op.Tables,
					op.CreatedAt.Local().Format(time.DateTime))
			}
			tw.Flush()
		})),
	}
	list.Flags().IntVar(&limit, "limit", 50, "operations to list (1..500)")
	cmd.AddCommand(status, list)
	return cmd
}

func bulkAction(g *globals, action, short string) *cobra.Command {
	var o bulkFlags
	cmd := &cobra.Command{
		Use:   action + " [filter flags]",
		Short: short,
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return o.check(action)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req := o.request(action)
			op, err := c.CreateOperation(cmd.Context(), req)
			if err != nil {
				return err
			}
			if o.noWait {
				if g.json {
					return g.printJSON(cmd, op)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "operation %s started; follow it with: ontime bulk status %s --wait\n", op.ID, op.ID)
				return nil
			}
			if op, err = waitOperation(cmd.Context(), c, op, cmd.ErrOrStderr()); err != nil {
				return err
			}
			return printOperation(g, cmd, op)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "only this topic")
	f.StringSliceVar(&o.status, "status", nil, "only these statuses (repeat or comma-separate): pending, claimed, running, done, dead, cancelled")
	f.StringVar(&o.keyPrefix, "key-prefix", "", "only keys that start with this (byte for byte; % and _ are plain)")
	f.StringVar(&o.dueAfter, "due-after", "", "only tasks due at or after this RFC 3339 time")
	f.StringVar(&o.dueBefore, "due-before", "", "only tasks due before this RFC 3339 time")
	f.StringVar(&o.errContains, "error-contains", "", "only tasks whose last error contains this (case-sensitive)")
	switch action {
	case "reschedule":
		f.StringVar(&o.at, "at", "", "the new due time, RFC 3339")
		f.StringVar(&o.in, "in", "", "the new due time as a duration from now (30m, 2h)")
		f.StringVar(&o.shift, "shift", "", "move each due time by this duration (may be negative: -1h)")
	case "requeue":
		f.StringVar(&o.at, "at", "", "due at this RFC 3339 time (default now)")
		f.StringVar(&o.in, "in", "", "due this duration from now (default now)")
	}
	f.BoolVar(&o.dryRun, "dry-run", false, "count what would change; change nothing")
	f.BoolVar(&o.noWait, "no-wait", false, "print the operation's ID and return at once")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// check judges the flags the CLI can (usage errors, exit 2); the server
// judges the rest.
func (o *bulkFlags) check(action string) error {
	for _, s := range o.status {
		if err := oneOf("--status", s, statuses); err != nil {
			return err
		}
	}
	for _, t := range []struct{ flag, v string }{{"--due-after", o.dueAfter}, {"--due-before", o.dueBefore}, {"--at", o.at}} {
		if t.v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, t.v); err != nil {
			return usagef("%s: %q is not an RFC 3339 time", t.flag, t.v)
		}
	}
	for _, d := range []struct{ flag, v string }{{"--in", o.in}, {"--shift", o.shift}} {
		if d.v == "" {
			continue
		}
		if _, err := time.ParseDuration(d.v); err != nil {
			return usagef("%s: %q is not a duration (30s, 1h30m)", d.flag, d.v)
		}
	}
	if o.topic == "" && len(o.status) == 0 && o.keyPrefix == "" && o.dueAfter == "" && o.dueBefore == "" && o.errContains == "" {
		return usagef("give at least one of --topic, --status, --key-prefix, --due-after, --due-before, --error-contains")
	}
	n := 0
	for _, v := range []string{o.at, o.in, o.shift} {
		if v != "" {
			n++
		}
	}
	if action == "reschedule" && n != 1 {
		return usagef("reschedule needs exactly one of --at, --in, --shift")
	}
	if n > 1 {
		return usagef("give at most one of --at, --in")
	}
	return nil
}

func (o *bulkFlags) request(action string) apiv1.OperationRequest {
	return apiv1.OperationRequest{Action: action, DryRun: o.dryRun, DueAt: o.at, Delay: o.in, Shift: o.shift,
		Filter: apiv1.OperationFilter{Topic: o.topic, Status: o.status, KeyPrefix: o.keyPrefix, DueAfter: o.dueAfter, DueBefore: o.dueBefore,
			ErrorContains: o.errContains}}
}

// waitOperation polls op until it ends, drawing a progress bar on w when
// it is a terminal.
func waitOperation(ctx context.Context, c *client.Client, op *apiv1.Operation, w io.Writer) (*apiv1.Operation, error) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	for op.Status != "done" && op.Status != "failed" {
		if tty {
			fmt.Fprintf(w, "\r%s", progressBar(op))
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		next, err := c.Operation(ctx, op.ID)
		if err != nil {
			return nil, err
		}
		op = next
	}
	if tty {
		fmt.Fprintf(w, "\r%s\n", progressBar(op))
	}
	return op, nil
}

// progressBar is one line: the tables walked as a bar, and the counts.
func progressBar(op *apiv1.Operation) string {
	const width = 30
	filled := 0
	if op.Tables > 0 {
		filled = width * op.TablesDone / op.Tables
	}
	return fmt.Sprintf("[%s%s] %d/%d tables  matched %d  changed %d  %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), op.TablesDone, op.Tables, op.Matched, op.Changed, op.Status)
}

func printOperation(g *globals, cmd *cobra.Command, op *apiv1.Operation) error {
	if g.json {
		return g.printJSON(cmd, op)
	}
	w := cmd.OutOrStdout()
	changed := "changed"
	if op.DryRun {
		changed = "would change"
	}
	fmt.Fprintf(w, "operation %s (%s): %s; matched %d, %s %d; %d/%d tables\n", op.ID, op.Action, op.Status, op.Matched, changed, op.Changed, op.TablesDone, op.Tables)
	if op.Error != "" {
		fmt.Fprintf(w, "error: %s\n", op.Error)
	}
	if op.Status == "failed" {
		return fmt.Errorf("operation %s failed: %s", op.ID, op.Error)
	}
	return nil
}
