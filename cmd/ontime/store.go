package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// The store verbs work on the databases of a config, not through a node;
// the nodes keep serving through every phase, the cutover included (they
// stop writing for it, then reopen the store grown: sqlstore/fence.go).

func newStoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Grow the task store: expand, status, abort",
		Long: `Grow the task store from M to 2M databases (the two-level scheme keeps every
row's table and moves half of each table to the new twin database), see
where an expansion stands, or abort one before its cutover.

These verbs open the databases of the config (--config, as ontime serve).`,
		Example: `  ontime store expand --config ontime.yaml --databases /data/b.db
  ontime store expand --config ontime.yaml --databases /data/b.db --cutover
  ontime store status --config ontime.yaml`,
		Args: noArgs,
	}
	cmd.AddCommand(newStoreExpandCmd(g), newStoreStatusCmd(g), newStoreAbortCmd(g))
	return cmd
}

// storeFlags are the flags every store verb takes.
type storeFlags struct {
	config string
}

func (f *storeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "path to ontime.yaml (default: built-in defaults)")
}

// open opens the store of the config, with extra databases after the
// configured ones when the config has not been grown yet.
func (f *storeFlags) open(ctx context.Context, extra []string) (*sqlstore.Store, ontime.Config, error) {
	cfg, err := ontime.LoadConfig(f.config, os.Environ())
	if err != nil {
		return nil, cfg, usagef("%v", err)
	}
	dsns := append(append([]string{}, cfg.Store.Databases...), extra...)
	st, err := sqlstore.Open(ctx, sqlstore.Config{Driver: cfg.Store.Driver, DSNs: dsns, Tables: cfg.Store.Tables, Segments: cfg.Store.Segments, MaxConns: cfg.Store.MaxConnections})
	if err != nil {
		return nil, cfg, err
	}
	cfg.Store.Tables = st.Tables()
	return st, cfg, nil
}

func newStoreExpandCmd(g *globals) *cobra.Command {
	var f storeFlags
	var dsns []string
	var cutover bool
	var page, rate int
	var nice float64
	var fenceWait time.Duration
	cmd := &cobra.Command{
		Use:   "expand --databases DSN… [--cutover] [--config ontime.yaml]",
		Short: "Double the store's databases: copy, then cut over, then clean up",
		Long: `Double the store's databases: --databases names as many new, empty databases
as the store has (the first becomes the twin of store.databases[0], and so on);
without it, store.expand_databases of the config does.

The nodes keep running throughout.

1. Without --cutover: the rows that move are copied to the new databases in
   pages, then the rows changed meanwhile. Run it again to catch up once
   more; killed, it resumes where it stopped.
2. With --cutover: the copy, then the cutover. Every node (ontime serve)
   stops its pipeline and holds API calls (they wait, they do not fail);
   a last catch-up runs with nothing writing, the store records its 2M
   databases, and the nodes reopen the store with them and serve again:
   a pause of a few seconds. A node that cannot stop within --fence-wait
   (an older version) makes the cutover give up and change nothing. Put
   the 2M databases in store.databases (old ones first, then --databases
   in order) before the nodes' next restart.
3. The same command then deletes the copies left in the old databases, in
   small batches, while the nodes serve (they pass over those copies). Killed,
   run it again (with the grown config, --databases is not needed).

Before --cutover, 'ontime store abort' undoes the expansion.

The copy and the cleanup run as fast as the databases let them; --nice
(sleep after each page, in proportion to its duration) or --rate (rows
per second) leaves more of the databases to the live load, for a longer
expansion.`,
		Example: `  ontime store expand --config ontime.yaml --databases "root@tcp(db3:3306)/ontime" --databases "root@tcp(db4:3306)/ontime"
  ontime store expand --config ontime.yaml   # the new databases in store.expand_databases
  ontime store expand --config ontime.yaml --databases "..." --databases "..." --cutover`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := sqlstore.ExpandOptions{Page: page, FenceWait: fenceWait, Nice: nice, Rate: rate}
			if err := o.Validate(); err != nil {
				return usagef("--%v", err)
			}
			if fenceWait < time.Second || fenceWait > time.Hour {
				return usagef("--fence-wait: %s is out of range 1s..1h", fenceWait)
			}
			return storeExpand(cmd, g, &f, dsns, cutover, o)
		},
	}
	f.add(cmd)
	cmd.Flags().StringArrayVar(&dsns, "databases", nil, "a new database, once per database the store has (repeat the flag)")
	cmd.Flags().BoolVar(&cutover, "cutover", false, "switch the store to its 2M databases (the nodes pause for it), then clean up")
	cmd.Flags().DurationVar(&fenceWait, "fence-wait", 2*time.Minute, "how long the cutover waits for every node to stop writing")
	cmd.Flags().IntVar(&page, "page", 0, "rows per copy page and per cleanup batch (0: 5,000 per copy page on PostgreSQL, 1,000 on the others; 500 per cleanup batch)")
	cmd.Flags().Float64Var(&nice, "nice", 0, "after each copy or cleanup page, sleep this many times the page's duration (0..100; 1 leaves the databases about half their time for the live load)")
	cmd.Flags().IntVar(&rate, "rate", 0, "at most this many rows copied or deleted per second (0: no cap)")
	return cmd
}

func storeExpand(cmd *cobra.Command, g *globals, f *storeFlags, dsns []string, cutover bool, o sqlstore.ExpandOptions) error {
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	o.OnProgress = progressPrinter(w, g.json)
	st, cfg, err := f.open(ctx, nil)
	field := "--databases"
	if len(dsns) == 0 && len(cfg.Store.ExpandDatabases) > 0 {
		dsns, field = cfg.Store.ExpandDatabases, "store.expand_databases"
	}
	if errors.Is(err, sqlstore.ErrTopology) && len(dsns) > 0 {
		// After the cutover, with the config not grown yet.
		st, _, err = f.open(ctx, dsns)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	status, err := st.ExpansionStatus(ctx)
	if err != nil {
		return err
	}
	if status.Phase == sqlstore.PhaseNone && status.Databases > 0 && len(dsns) == 0 {
		return usagef("--databases: name %d new databases, one per database of the store (or list them in store.expand_databases)", status.Databases)
	}
	if status.Phase != sqlstore.PhaseCleanup {
		if err := st.ExpandBeginAs(ctx, field, dsns); err != nil {
			return err
		}
		start := time.Now()
		if err := st.ExpandCopy(ctx, o); err != nil {
			return err
		}
		s, _ := st.ExpansionStatus(ctx)
		fmt.Fprintf(w, "copied %d rows to %d new databases in %s\n", s.RowsCopy, s.To-s.From, time.Since(start).Round(time.Millisecond))
		if !cutover {
			fmt.Fprintln(w, "next: run this command again with --cutover (the nodes keep running; they pause for the switch)")
			return nil
		}
		cut := time.Now()
		var tm sqlstore.CutoverTimings
		o.Timings = &tm
		if err := st.ExpandCutover(ctx, o); err != nil {
			return err
		}
		took := time.Since(cut)
		fmt.Fprintf(w, "cutover took %s (the nodes' pause: %s until they stopped writing, %s the last catch-up, %s the switch)\n",
			took.Round(time.Millisecond), tm.Stopped.Round(time.Millisecond), tm.CatchUp.Round(time.Millisecond), (took - tm.Stopped - tm.CatchUp).Round(time.Millisecond))
		st.Close()
		if st, _, err = f.open(ctx, dsns); err != nil {
			return fmt.Errorf("after the cutover: %w", err)
		}
		defer st.Close()
		fmt.Fprintf(w, "cut over: the store has %d databases and the nodes serve them; set store.databases to the old ones then --databases, in order, before the nodes' next restart\n", s.To)
	}
	start := time.Now()
	if err := st.ExpandCleanup(ctx, o); err != nil {
		return err
	}
	s, _ := st.ExpansionStatus(ctx)
	fmt.Fprintf(w, "cleaned up in %s: the store has %d databases\n", time.Since(start).Round(time.Millisecond), s.Databases)
	return nil
}

// progressPrinter prints an expansion's progress when a phase begins and
// then at most once a second.
func progressPrinter(w io.Writer, quiet bool) func(sqlstore.ExpandStatus) {
	var last time.Time
	phase := ""
	return func(s sqlstore.ExpandStatus) {
		if quiet || (s.Phase == phase && time.Since(last) < time.Second) {
			return
		}
		last, phase = time.Now(), s.Phase
		fmt.Fprintf(w, "%s: %d/%d tables copied (%d rows), %d cleaned (%d rows deleted)\n", s.Phase, s.Copied, s.Tables, s.RowsCopy, s.Cleaned, s.RowsClean)
	}
}

func newStoreStatusCmd(g *globals) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "status [--config ontime.yaml]",
		Short: "Show the store's databases and any expansion under way",
		Long: `Show the store's databases and the progress of an expansion under way: by
default as a node answers it (GET /v1/store on --server); with --config, read
from the databases of the config (while the nodes are stopped, for a cutover).`,
		Example: `  ontime store status
  ontime store status --config ontime.yaml --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.config == "" {
				c, err := g.client()
				if err != nil {
					return err
				}
				v, err := c.StoreStatus(cmd.Context())
				if err != nil {
					return err
				}
				if g.json {
					return g.printJSON(cmd, v)
				}
				printStoreView(cmd.OutOrStdout(), v)
				return nil
			}
			st, cfg, err := f.open(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.ExpansionStatus(cmd.Context())
			if err != nil {
				return err
			}
			v := storeView(s, cfg.Store.Tables)
			if g.json {
				return g.printJSON(cmd, v)
			}
			printStoreView(cmd.OutOrStdout(), v)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func printStoreView(w io.Writer, v *apiv1.StoreStatus) {
	fmt.Fprintf(w, "databases  %d × %d tables (topology epoch %d)\n", v.Databases, v.Tables, v.Epoch)
	e := v.Expansion
	if e == nil {
		fmt.Fprintln(w, "expansion  none")
		return
	}
	fmt.Fprintf(w, "expansion  %d → %d databases, phase %s, since %s\n", e.From, e.To, e.Phase, e.Since.Format(time.RFC3339))
	fmt.Fprintf(w, "copy       %d/%d tables, %d rows\n", e.TablesCopied, e.Tables, e.RowsCopied)
	fmt.Fprintf(w, "cleanup    %d/%d tables, %d rows deleted\n", e.TablesCleaned, e.Tables, e.RowsDeleted)
}

func newStoreAbortCmd(g *globals) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "abort [--config ontime.yaml]",
		Short: "Undo an expansion before its cutover",
		Long: `Undo an expansion before its cutover: the rows copied to the new databases
and their identities are deleted, and the store is as it was. After the
cutover an expansion can only finish.`,
		Example: `  ontime store status --config ontime.yaml     # phase copy: it can still be undone
  ontime store abort --config ontime.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, err := f.open(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.ExpandAbort(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "aborted: the store is as it was")
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// storeView is GET /v1/store's answer made from the databases (the node's
// own is ontime's storeStatusView).
func storeView(st sqlstore.ExpandStatus, tables int) *apiv1.StoreStatus {
	v := &apiv1.StoreStatus{Databases: st.Databases, Tables: tables, Epoch: st.Epoch}
	if st.Phase != sqlstore.PhaseNone {
		v.Expansion = &apiv1.StoreExpansion{Phase: st.Phase, From: st.From, To: st.To, Since: st.Since, Tables: st.Tables,
			TablesCopied: st.Copied, TablesCleaned: st.Cleaned, RowsCopied: st.RowsCopy, RowsDeleted: st.RowsClean}
	}
	return v
}
