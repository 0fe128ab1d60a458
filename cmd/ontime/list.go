package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ontimehq/ontime/client"
)

// runList: ontime list [--topic T] [--status S] [--limit N] [--cursor C]
func runList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("list")
	var cf clientFlags
	cf.register(fs)
	var o client.ListOptions
	fs.StringVar(&o.Topic, "topic", "", "only this topic")
	fs.StringVar(&o.Status, "status", "", "only this status: pending, claimed, running, done, dead, cancelled")
	fs.IntVar(&o.Limit, "limit", 50, "tasks per page (1..1000)")
	fs.StringVar(&o.Cursor, "cursor", "", "continue after this cursor (printed at the end of a page)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return fail(stderr, "list", 2, err)
	}
	if len(pos) > 0 {
		return fail(stderr, "list", 2, fmt.Errorf("unexpected argument %q", pos[0]))
	}
	if o.Limit < 1 || o.Limit > 1000 {
		return fail(stderr, "list", 2, fmt.Errorf("--limit: %d is out of range 1..1000", o.Limit))
	}
	c, err := cf.client()
	if err != nil {
		return fail(stderr, "list", 2, err)
	}
	page, err := c.List(ctx, o)
	if err != nil {
		return fail(stderr, "list", 1, err)
	}
	if cf.json {
		_ = json.NewEncoder(stdout).Encode(page)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOPIC\tKEY\tSTATUS\tDUE\tATTEMPTS\tLAST ERROR")
	for _, t := range page.Tasks {
		last := t.LastError
		if len(last) > 40 {
			last = last[:40] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Topic, t.Key, t.Status, t.DueAt.Local().Format(time.DateTime), t.Attempts, t.MaxAttempts, last)
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return 0
}
