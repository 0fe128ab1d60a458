package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ontimehq/ontime/client"
)

// clientFlags are the flags every API verb shares.
type clientFlags struct {
	server string
	json   bool
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("ONTIME_SERVER")
	if def == "" {
		def = "http://127.0.0.1:7070"
	}
	fs.StringVar(&cf.server, "server", def, "ontime API address (env ONTIME_SERVER)")
	fs.BoolVar(&cf.json, "json", false, "print JSON for scripts")
}

// newFlagSet makes a verb's flag set that reports errors in one line.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses flags that may come before or after positional
// arguments ("ontime get ID --json").
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// fail prints one line and returns the exit code.
func fail(stderr io.Writer, verb string, code int, err error) int {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(stderr, "ontime: %s: %s\n", verb, msg)
	return code
}

func (cf *clientFlags) client() (*client.Client, error) { return client.New(cf.server) }

func printTask(w io.Writer, asJSON bool, t *client.Task) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(t)
		return
	}
	fmt.Fprintf(w, "id           %s\n", t.ID)
	fmt.Fprintf(w, "topic        %s\n", t.Topic)
	if t.Key != "" {
		fmt.Fprintf(w, "key          %s\n", t.Key)
	}
	fmt.Fprintf(w, "status       %s\n", t.Status)
	fmt.Fprintf(w, "due          %s (%s)\n", t.DueAt.Local().Format(time.RFC3339Nano), relative(t.DueAt))
	fmt.Fprintf(w, "attempts     %d of %d\n", t.Attempts, t.MaxAttempts)
	if t.Target != "" {
		fmt.Fprintf(w, "target       %s\n", t.Target)
	}
	fmt.Fprintf(w, "payload      %s\n", t.Payload)
	if t.LastError != "" {
		fmt.Fprintf(w, "last error   %s\n", t.LastError)
	}
}

func relative(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	default:
		return "now"
	}
}

// apiVerb runs a verb that takes one task ID and prints the task.
func apiVerb(ctx context.Context, verb string, args []string, stdout, stderr io.Writer,
	call func(ctx context.Context, c *client.Client, id string) (*client.Task, error)) int {
	fs := newFlagSet(verb)
	var cf clientFlags
	cf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return fail(stderr, verb, 2, err)
	}
	if len(pos) != 1 {
		return fail(stderr, verb, 2, fmt.Errorf("want exactly one task ID, got %d arguments", len(pos)))
	}
	c, err := cf.client()
	if err != nil {
		return fail(stderr, verb, 2, err)
	}
	t, err := call(ctx, c, pos[0])
	if err != nil {
		return fail(stderr, verb, 1, err)
	}
	printTask(stdout, cf.json, t)
	return 0
}
