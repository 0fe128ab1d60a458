package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
	"github.com/ontimehq/ontime/outbox"
)

func newOutboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "outbox",
		Short:   "Outbox tables: their DDL, their status",
		Long:    `Tools for outbox tables (package outbox, outboxes: in the config).`,
		Example: "  ontime outbox ddl --driver mysql --table outbox\n  ontime outbox status",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("which tool? ontime outbox ddl | status")
		},
	}
	cmd.AddCommand(newOutboxDDLCmd(g), newOutboxStatusCmd(g))
	return cmd
}

func newOutboxDDLCmd(*globals) *cobra.Command {
	var drv, table string
	cmd := &cobra.Command{
		Use:   "ddl --driver mysql|postgres|sqlite --table NAME",
		Short: "Print the CREATE statements of an outbox table",
		Long: `Print the CREATE TABLE and CREATE INDEX statements of an outbox table for
a DBA to run (once per table of a sharded outbox). It needs no server.`,
		Example: `  ontime outbox ddl --driver postgres --table outbox
  ontime outbox ddl --driver mysql --table outbox_3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if drv == "" || table == "" {
				return usagef("--driver and --table are required")
			}
			stmts, err := outbox.DDL(outbox.Dialect(drv), table)
			if err != nil {
				return usagef("%v", err)
			}
			for _, s := range stmts {
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s;\n", s); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&drv, "driver", "", "mysql | postgres | sqlite")
	cmd.Flags().StringVar(&table, "table", "", "the table's name (schema.table on PostgreSQL)")
	return cmd
}

func newOutboxStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show each outbox table: rows waiting, set aside, held keys, oldest age, relayed/s",
		Long: `Show every outbox of the node's config (or the one named), a line per table:
rows waiting, in flight and set aside, the age of the oldest unfinished row,
the keys held back by a failing message, and what this node relayed of it
(relayed per second over the last minute, failures). Below, the set-aside
rows (malformed: they will never be tasks; fix or delete them) and the heads
of held keys, with their errors, a few per table. The counts read every
unfinished row: an operator's command, not one to run in a loop.

Exit code 3 when NAME is not an outbox of the node, 1 when a table could not
be read (its line says why).`,
		Example: `  ontime outbox status
  ontime outbox status main --json | jq '.[].tables[] | select(.set_aside > 0)'`,
		Args: atMostOneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			obs, err := outboxStatus(cmd, c, args)
			if err != nil {
				return err
			}
			if g.json {
				err = g.printJSON(cmd, obs)
			} else {
				err = printOutboxes(cmd.OutOrStdout(), obs)
			}
			if err != nil {
				return err
			}
			for _, o := range obs {
				for _, t := range o.Tables {
					if t.Error != "" {
						return failf(exitError, "outbox %s table %s (database %d) could not be read: %s", o.Name, t.Table, t.Database, t.Error)
					}
				}
			}
			return nil
		},
	}
}

func outboxStatus(cmd *cobra.Command, c *client.Client, args []string) ([]apiv1.Outbox, error) {
	obs, err := c.Outboxes(cmd.Context())
	if err != nil || len(args) == 0 {
		return obs, err
	}
	for _, o := range obs {
		if o.Name == args[0] {
			return []apiv1.Outbox{o}, nil
		}
	}
	return nil, failf(exitNotFound, "no outbox %q in the node's config", args[0])
}

func printOutboxes(w io.Writer, obs []apiv1.Outbox) error {
	if len(obs) == 0 {
		_, err := fmt.Fprintln(w, "no outboxes in the node's config (outboxes:)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTBOX\tDB\tTABLE\tWAITING\tIN FLIGHT\tSET ASIDE\tHELD KEYS\tOLDEST\tRELAYED/S\tFAILURES")
	for _, o := range obs {
		for _, t := range o.Tables {
			if t.Error != "" {
				fmt.Fprintf(tw, "%s\t%d\t%s\terror: %s\n", o.Name, t.Database, t.Table, oneLineOf(t.Error))
				continue
			}
			oldest := "-"
			if t.OldestAgeSeconds > 0 {
				oldest = (time.Duration(t.OldestAgeSeconds * float64(time.Second))).Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%.1f\t%d\n", o.Name, t.Database, t.Table,
				t.Waiting, t.InFlight, t.SetAside, t.HeldKeys, oldest, t.RelayedPerSecond, t.Failures)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range obs {
		for _, t := range o.Tables {
			for _, what := range []struct {
				title string
				n     int64
				rows  []apiv1.OutboxRowError
			}{{"set aside", t.SetAside, t.SetAsideSample}, {"holding back their key", t.HeldKeys, t.HeldSample}} {
				if len(what.rows) == 0 {
					continue
				}
				fmt.Fprintf(w, "\n%s %s (database %d): %d %s; the first:\n", o.Name, t.Table, t.Database, what.n, what.title)
				for _, r := range what.rows {
					task := ""
					if r.TaskID != "" {
						task = "  task " + r.TaskID // ontime get shows what it holds back
					}
					fmt.Fprintf(w, "  id %d  topic %q  key %q  tries %d  written %s%s\n    %s\n", r.ID, r.Topic, r.Key, r.Retries,
						r.CreatedAt.Format(time.RFC3339), task, oneLineOf(r.Error))
				}
			}
		}
	}
	return nil
}

// oneLineOf keeps an error on one line of the table.
func oneLineOf(s string) string { return strings.Join(strings.Fields(s), " ") }

// atMostOneArg takes an optional outbox name.
func atMostOneArg(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef("want at most one outbox name, got %d arguments", len(args))
	}
	return nil
}
