package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/ontimehq/ontime"
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
	if _, err := cf.client(); err != nil {
		return fail(stderr, "cluster", 2, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cf.server+"/v1/cluster", nil)
	if err != nil {
		return fail(stderr, "cluster", 2, err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fail(stderr, "cluster", 1, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(stderr, "cluster", 1, fmt.Errorf("HTTP %d", resp.StatusCode))
	}
	var v ontime.ClusterView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
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
