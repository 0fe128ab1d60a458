package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// runCluster: ontime cluster — nodes, leader, and per item its owner and lag.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cluster")
	var cf clientFlags
	cf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return fail(stderr, "cluster", 2, err)
	}
	if len(pos) > 0 {
		return fail(stderr, "cluster", 2, fmt.Errorf("unexpected argument %q", pos[0]))
	}
	c, err := cf.client()
	if err != nil {
		return fail(stderr, "cluster", 2, err)
	}
	v, err := c.Cluster(ctx)
	if err != nil {
		return fail(stderr, "cluster", 1, err)
	}
	if cf.json {
		_ = json.NewEncoder(stdout).Encode(v)
		return 0
	}
	fmt.Fprintf(stdout, "coordinator %s, leader %s (term %d), asked %s\n\n", v.Coordinator, v.Leader, v.Term, v.Node)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tLIVE\tLAST HEARTBEAT\tITEMS")
	for _, nd := range v.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s ago\t%d\n", nd.ID, nd.Addr, nd.Live, time.Since(nd.Heartbeat).Round(time.Millisecond), nd.Items)
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tOWNER\tSCAN LAG")
	for _, it := range v.Items {
		owner := it.Owner
		if owner == "" {
			owner = "(unassigned)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3fs\n", it.Item, owner, it.LagSecs)
	}
	tw.Flush()
	return 0
}
