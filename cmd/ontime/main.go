// Command ontime is the ontime scheduler: `ontime serve` runs a node, the
// other verbs are clients of its HTTP API or local tools.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one verb of the CLI. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the verbs; each lives in a file of its own.
func commands() map[string]command {
	return map[string]command{
		"serve":   {"run a node (API, scanner, delivery)", runServe},
		"submit":  {"submit a task", runSubmit},
		"get":     {"show a task", runGet},
		"cancel":  {"cancel a pending task", runCancel},
		"requeue": {"return a dead task to pending", runRequeue},
		"list":    {"list tasks", runList},
		"cluster": {"show the cluster: nodes, leader, item owners, scan lag", runCluster},
		"shard":   {"local tools for the shard layout (shard check)", runShard},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, cmds)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ontime: unknown command %q (run 'ontime help')\n", args[0])
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ontime <command> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}
