package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

func newJobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect, trigger, pause and resume scan jobs",
		Long: `Scan jobs walk the users' own tables on a cron schedule, sharded into items
(database.table.segment) that the cluster spreads over live nodes. These verbs
are clients of GET /v1/jobs… and POST /v1/jobs/{name}:trigger|:pause|:resume.`,
		Example: `  ontime jobs list
  ontime jobs get bill-settle
  ontime jobs runs bill-settle --item 0.12.0 --limit 20
  ontime jobs trigger bill-settle
  ontime jobs pause bill-settle`,
		Args: noArgs,
	}
	cmd.AddCommand(newJobsListCmd(g), newJobsGetCmd(g), newJobsRunsCmd(g),
		newJobsOpCmd(g, "trigger", "Run every item of a job now, on the nodes that own them"),
		newJobsOpCmd(g, "pause", "Pause a job cluster wide: triggers do nothing, running items stop after their page"),
		newJobsOpCmd(g, "resume", "Resume a paused job: its unfinished items carry on from their cursors at the next trigger"))
	return cmd
}

func newJobsListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the scan jobs",
		Long:    "List the scan jobs: kind, schedule, items, paused, next fire time and the index check of SQL jobs.",
		Example: "  ontime jobs list\n  ontime jobs list --json",
		Args:    noArgs,
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) (apiv1.JobList, error) {
			jobs, err := c.Jobs(cmd.Context())
			return apiv1.JobList{Jobs: jobs}, err
		}, func(w io.Writer, l apiv1.JobList) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tCRON\tITEMS\tPAUSED\tNEXT FIRE\tINDEX")
			for _, j := range l.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\t%s\t%s\n", j.Name, j.Kind, stateWord(j.State), j.Cron, j.Items, j.Paused, fmtTime(j.NextFire), indexWord(j.Index))
			}
			return tw.Flush()
		}),
	}
}

// stateWord shouts a job state that needs an operator: a broken job runs
// nothing until its statements pass again.
func stateWord(state string) string {
	if state == "" || state == "ok" {
		return "ok"
	}
	return strings.ToUpper(state)
}

func indexWord(ic *apiv1.JobIndexView) string {
	switch {
	case ic == nil:
		return "-"
	case ic.OK:
		return "ok (" + ic.Index + ")"
	default:
		return "MISSING"
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newJobsGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a job and each item's owner, unfinished run and cursor",
		Long: `Show one job: its definition, the index check of a SQL job (with the plan
EXPLAIN printed and a warning when no index serves where + key order), and
each item with its owner, the node that last ran it, an unfinished run and
its cursor (where the next holder resumes), and its last fire time.`,
		Example: "  ontime jobs get bill-settle\n  ontime jobs get bill-settle --json | jq .index",
		Args:    exactArgs(1, "NAME"),
		RunE: runOne(g, func(ctx context.Context, c *client.Client, name string) (*apiv1.JobView, error) {
			return c.Job(ctx, name)
		}, printJob),
	}
}

// printJob prints a job, the index check of a SQL job and a line per item.
func printJob(out io.Writer, j *apiv1.JobView) error {
	fmt.Fprintf(out, "%s (%s): cron %q %s, misfire %s, overlap %s, %d items, paused %v, next fire %s\n",
		j.Name, j.Kind, j.Cron, j.TimeZone, j.Misfire, j.Overlap, j.Items, j.Paused, fmtTime(j.NextFire))
	if j.Target != "" {
		fmt.Fprintf(out, "target %s\n", j.Target)
	}
	if j.State != "" && j.State != "ok" {
		fmt.Fprintf(out, "%s since %s: %s\n", stateWord(j.State), fmtTime(j.BrokenSince), j.Error)
	}
	if ic := j.Index; ic != nil {
		fmt.Fprintf(out, "index on %s: %s\n", ic.Table, indexWord(ic))
		if ic.Warning != "" {
			fmt.Fprintf(out, "WARNING: %s\n", ic.Warning)
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tOWNER\tLAST RUN ON\tUNFINISHED RUN\tCURSOR\tLAST FIRE")
	for _, it := range j.ItemStates {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.Item, dash(it.Owner), dash(it.Holder), dash(it.RunID), dash(it.Cursor), fmtTime(it.LastFire))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newJobsRunsCmd(g *globals) *cobra.Command {
	var item string
	var limit int
	cmd := &cobra.Command{
		Use:   "runs NAME [--item ITEM] [--limit N]",
		Short: "List a job's latest runs, newest first",
		Long: `List a job's runs, newest first: one per trigger and item, with its node,
trigger (cron, manual, misfire, resume), start and end, rows fetched,
processed, failed and left (failed max_attempts times), cursor, status and
error.`,
		Example: "  ontime jobs runs bill-settle\n  ontime jobs runs bill-settle --item 1.49.0 --limit 5",
		Args:    exactArgs(1, "NAME"),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || limit > 1000 || (cmd.Flags().Changed("limit") && limit < 1) {
				return usagef("--limit: %d is not from 1 to 1000", limit)
			}
			return nil
		},
		RunE: runOne(g, func(ctx context.Context, c *client.Client, name string) (apiv1.JobRunList, error) {
			runs, err := c.JobRuns(ctx, name, item, limit)
			return apiv1.JobRunList{Runs: runs}, err
		}, func(w io.Writer, l apiv1.JobRunList) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STARTED\tITEM\tNODE\tTRIGGER\tSTATUS\tTOOK\tFETCHED\tPROCESSED\tFAILED\tLEFT\tERROR")
			for _, r := range l.Runs {
				took := "-"
				if !r.EndedAt.IsZero() {
					took = r.EndedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.StartedAt.UTC().Format(time.RFC3339), r.Item, r.Node,
					r.Trigger, r.Status, took, r.Fetched, r.Processed, r.Failed, r.Left, r.Error)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().StringVar(&item, "item", "", "only this item (database.table.segment, or the index of a Go job's item)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many runs (1-1000; default 100)")
	return cmd
}

func newJobsOpCmd(g *globals, op, short string) *cobra.Command {
	return &cobra.Command{
		Use:     op + " NAME",
		Short:   short,
		Long:    short + ` (POST /v1/jobs/{name}:` + op + `); prints the job.`,
		Example: "  ontime jobs " + op + " bill-settle",
		Args:    exactArgs(1, "NAME"),
		RunE: runOne(g, func(ctx context.Context, c *client.Client, name string) (*apiv1.JobView, error) {
			return c.JobOp(ctx, name, op)
		}, func(w io.Writer, j *apiv1.JobView) error {
			done := map[string]string{"trigger": "triggered", "pause": "paused", "resume": "resumed"}[op]
			fmt.Fprintf(w, "%s %s (paused %v)\n", j.Name, done, j.Paused)
			return nil
		}),
	}
}
