package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

func newClusterCmd(g *globals) *cobra.Command {
	var items bool
	cmd := &cobra.Command{
		Use:   "cluster [--items]",
		Short: "Show the cluster: nodes, leader, scan lag",
		Long: `Show the cluster as the node asked sees it: the coordinator, the leader and
one line per node with its sharding items and the scan lag of the worst of
them (how far past due its oldest pending task is) and its zone
(cluster.zone). --items adds one line per sharding item
(database.table.segment) with its database's zone (store.zones), its owner
and lag.`,
		Example: `  ontime cluster
  ontime cluster --items --server node-2:7070
  ontime cluster --json | jq '.nodes[] | select(.live | not)'`,
		Args: noArgs,
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) (*client.ClusterView, error) {
			v, err := c.Cluster(cmd.Context())
			if err == nil && g.json && !items {
				v.Items = nil // the per-node summary is in nodes
			}
			return v, err
		}, func(w io.Writer, v *client.ClusterView) error { return printCluster(w, v, items) }),
	}
	cmd.Flags().BoolVar(&items, "items", false, "also list every sharding item with its owner and scan lag")
	return cmd
}

// printCluster prints the coordinator, a line per node and, with items, a
// line per sharding item.
func printCluster(out io.Writer, v *client.ClusterView, items bool) error {
	lag := map[string]float64{}
	unassigned := 0
	for _, it := range v.Items {
		if it.Owner == "" {
			unassigned++
		}
		lag[it.Owner] = max(lag[it.Owner], it.LagSecs)
	}
	fmt.Fprintf(out, "coordinator %s, leader %s (term %d), asked %s; %d items, %d unassigned\n\n",
		v.Coordinator, v.Leader, v.Term, v.Node, len(v.Items), unassigned)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tZONE\tLIVE\tLAST HEARTBEAT\tITEMS\tMAX SCAN LAG\tVERSION")
	for _, nd := range v.Nodes {
		ver := nd.Version
		if ver == "" {
			ver = "-" // a node of an earlier version registers none
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s ago\t%d\t%.3fs\t%s\n", nd.ID, nd.Addr, zoneOr(nd.Zone), nd.Live, time.Since(nd.Heartbeat).Round(time.Millisecond), nd.Items, lag[nd.ID], ver)
	}
	tw.Flush()
	if !items {
		return nil
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tZONE\tOWNER\tSCAN LAG")
	for _, it := range v.Items {
		owner := it.Owner
		if owner == "" {
			owner = "(unassigned)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3fs\n", it.Item, zoneOr(it.Zone), owner, it.LagSecs)
	}
	return tw.Flush()
}

// zoneOr is a zone for a table cell: "-" for none.
func zoneOr(z string) string {
	if z == "" {
		return "-"
	}
	return z
}
