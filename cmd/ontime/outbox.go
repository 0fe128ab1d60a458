package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/outbox"
)

func newOutboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "outbox",
		Short:   "Outbox tables: their DDL",
		Long:    `Tools for outbox tables (package outbox, outboxes: in the config).`,
		Example: `  ontime outbox ddl --driver mysql --table outbox`,
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("which tool? ontime outbox ddl")
		},
	}
	cmd.AddCommand(newOutboxDDLCmd(g))
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
