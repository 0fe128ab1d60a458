// Command ontime is the ontime scheduler: `ontime serve` runs a node, the
// other verbs are clients of its HTTP API or local tools.
//
// Adding a verb (or a group of verbs): write one new file, foo.go, with
//
//	func newFooCmd(g *globals) *cobra.Command
//
// returning a cobra.Command whose RunE does the work, and add newFooCmd to
// verbs() below — one line. In RunE:
//   - talk to the server with g.client() (it honours --server);
//   - print to cmd.OutOrStdout(), and JSON when g.json (--json, on every verb):
//     g.printJSON(cmd, v);
//   - return errors, never print them: run() prints one line "ontime: VERB:
//     message" and picks the exit code (exitCode: API 404 → 3, 409 → 4,
//     401/403 → 6, no answer → 5); return usagef(...) for a bad command line
//     (exit 2). Declare positional arguments with exactArgs/noArgs so that
//     a wrong count is a usage error too.
//
// Give every verb a Short, a Long that says what it does, and an Example.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// verbs lists the constructors of the top-level commands, one file each.
func verbs() []func(*globals) *cobra.Command {
	return []func(*globals) *cobra.Command{
		newServeCmd,
		newSubmitCmd,
		newGetCmd,
		newCancelCmd,
		newRequeueCmd,
		newPurgeCmd,
		newUpdateCmd, // keys.go
		newKeyCmd,    // keys.go
		newListCmd,
		newTopicsCmd,
		newBulkCmd, // bulk.go
		newClusterCmd,
		newShardCmd,
		newStoreCmd,  // store.go
		newOutboxCmd, // outbox.go
		newSchedulesCmd,
		newJobsCmd,
		newVersionCmd,
	}
}

// The exit codes (docs/quickstart.md, "The CLI").
const (
	exitOK           = 0
	exitError        = 1
	exitUsage        = 2
	exitNotFound     = 3
	exitConflict     = 4
	exitUnreachable  = 5
	exitUnauthorized = 6
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// globals are the flags every verb shares and the environment they run in.
type globals struct {
	server string // --server, or ONTIME_SERVER
	json   bool   // --json
	token  string // --token, or ONTIME_TOKEN (security.go)
	caFile string // --ca-file, or ONTIME_CA_FILE
	env    func(string) string
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "ontime",
		Short: "ontime — a distributed delayed-task scheduler",
		Long: `ontime delivers tasks at a future moment — to a webhook, a message broker or a
Go handler — at least once, never early.

'ontime serve' runs a node. The other verbs are clients of a node's HTTP API
(--server, default http://127.0.0.1:7070 or $ONTIME_SERVER) or local tools.

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict, 5 server
unreachable, 6 unauthorized.`,
		Example: `  ontime serve
  ontime submit --topic order.cancel --key order-42 --in 30m --target https://shop.example/hooks/cancel
  ontime list --status dead
  ontime get 01JD5Q5H0C8Y2X4ZV7M3N9P6RT --server ontime.internal:7070`,
		Version:           versionString(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	def := g.env("ONTIME_SERVER")
	if def == "" {
		def = defaultServer
	}
	root.PersistentFlags().StringVar(&g.server, "server", def, "API address, host:port or URL (env ONTIME_SERVER)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON for scripts")
	addSecurityFlags(root, g)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitErr{code: exitUsage, err: err} })
	root.SetVersionTemplate("{{.Version}}\n")
	for _, v := range verbs() {
		root.AddCommand(v(g))
	}
	root.SetHelpCommand(newHelpCmd(root))
	return root
}

// newHelpCmd is cobra's help verb, except that an unknown topic is a usage
// error (exit 2) rather than a help page and exit 0.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [verb]",
		Short: "Help about any verb",
		Long:  `Help about any verb: ontime help submit is ontime submit --help.`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, sub := range root.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("no verb %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// strictGroups makes every verb that has verbs of its own (key, jobs,
// topics, schedules, completion …) refuse one it does not have, and one
// given none ask which: cobra would print the help and exit 0, so that
// `ontime key bogus` or `ontime completion tcsh` looked as if it worked.
// The root refuses unknown verbs itself ("unknown command").
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasParent() || !c.HasAvailableSubCommands() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown verb %q; %s takes %s", args[0], cmd.CommandPath(), verbNames(cmd))
		}
		return nil
	}
	if !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			return usagef("which verb? %s", verbNames(cmd))
		}
	}
}

// verbNames lists the verbs of a group, for its usage errors.
func verbNames(c *cobra.Command) string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && sub.Name() != "help" {
			names = append(names, sub.Name())
		}
	}
	return strings.Join(names, ", ")
}

// run executes the CLI and returns the process exit code. Errors are
// printed here, one line each, so every verb fails the same way.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{env: os.Getenv}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// After SetOut: cobra's completion verbs keep the writer they were
	// made with.
	root.InitDefaultCompletionCmd(args...)
	strictGroups(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	verb := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), root.Name()), " ")
	prefix := "ontime: "
	if verb != "" {
		prefix += verb + ": "
	}
	msg := strings.Join(strings.Fields(errorLine(err)), " ")
	if code == exitUsage {
		msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
	}
	fmt.Fprintln(stderr, prefix+msg)
	return code
}

// exitErr carries the exit code a failure must end the process with.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// usagef reports a bad command line: exit code 2.
func usagef(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failf reports a failure with a given exit code.
func failf(code int, format string, args ...any) error {
	return &exitErr{code: code, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ee *exitErr
	if errors.As(err, &ee) {
		return ee.code
	}
	if code, ok := apiExitCode(err); ok {
		return code
	}
	// cobra's own command-line errors are plain errors.
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "required flag"} {
		if strings.HasPrefix(err.Error(), p) {
			return exitUsage
		}
	}
	return exitError
}

// noArgs refuses positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// exactArgs wants n positional arguments, named what in the message.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want exactly %d %s, got %d arguments", n, what, len(args))
		}
		return nil
	}
}
