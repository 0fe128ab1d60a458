package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

const defaultServer = "http://127.0.0.1:7070"

// serverURL turns --server into a base URL: "host:port" means
// http://host:port, so the address a node prints can be pasted as is.
func serverURL(s string) (string, error) {
	raw := strings.TrimSpace(s)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", usagef("--server: %q is not host:port or an http(s) URL such as 127.0.0.1:7070 or https://ontime.example", s)
	}
	if strings.HasPrefix(u.Host, ":") { // ":7070": this machine
		u.Host = "127.0.0.1" + u.Host
	}
	return u.Scheme + "://" + u.Host, nil
}

// client returns an API client for --server.
func (g *globals) client() (*client.Client, error) {
	base, err := serverURL(g.server)
	if err != nil {
		return nil, err
	}
	c, err := client.New(base, g.clientOptions()...)
	if err != nil {
		return nil, usagef("%v", err) // a CA file that cannot be read
	}
	return c, nil
}

// printJSON writes v as one line of JSON.
func (g *globals) printJSON(cmd *cobra.Command, v any) error {
	return json.NewEncoder(cmd.OutOrStdout()).Encode(v)
}

// apiExitCode maps an answer of the API (or the lack of one) to an exit code.
func apiExitCode(err error) (int, bool) {
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound:
			return exitNotFound, true
		case http.StatusConflict:
			return exitConflict, true
		case http.StatusUnauthorized, http.StatusForbidden:
			return exitUnauthorized, true
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			return exitUnreachable, true
		}
		return exitError, true
	}
	var ue *url.Error
	if errors.As(err, &ue) && !errors.Is(err, context.Canceled) {
		return exitUnreachable, true
	}
	return 0, false
}

// errorLine is the message of err for people: a transport failure becomes
// one line saying which server did not answer and what to check.
func errorLine(err error) string {
	var ae *client.APIError
	var ue *url.Error
	switch {
	case errors.As(err, &ae):
		return ae.Error()
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.As(err, &ue):
		server := ue.URL
		if u, perr := url.Parse(ue.URL); perr == nil {
			server = u.Scheme + "://" + u.Host
		}
		return fmt.Sprintf("cannot reach the server at %s (%s); is 'ontime serve' running there? Set --server or ONTIME_SERVER", server, transportCause(ue))
	}
	return err.Error()
}

// transportCause names why a request got no answer, in a few words.
func transportCause(ue *url.Error) string {
	var dnsErr *net.DNSError
	var sysErr *os.SyscallError
	switch {
	case ue.Timeout():
		return "no answer in time"
	case errors.As(ue.Err, &dnsErr):
		return "no such host " + dnsErr.Name
	case errors.As(ue.Err, &sysErr):
		return sysErr.Err.Error()
	case errors.Is(ue.Err, io.EOF):
		return "the connection was closed"
	}
	return ue.Err.Error()
}

func printTask(w io.Writer, t *client.Task) {
	fmt.Fprintf(w, "id           %s\n", t.ID)
	fmt.Fprintf(w, "topic        %s\n", t.Topic)
	if t.Key != "" {
		fmt.Fprintf(w, "key          %s\n", t.Key)
	}
	fmt.Fprintf(w, "status       %s\n", t.Status)
	fmt.Fprintf(w, "due          %s (%s)\n", t.DueAt.Local().Format(time.RFC3339Nano), relative(t.DueAt))
	if !t.FirstDueAt.IsZero() && !t.FirstDueAt.Equal(t.DueAt) {
		fmt.Fprintf(w, "first due    %s (%s); %s\n", t.FirstDueAt.Local().Format(time.RFC3339Nano), relative(t.FirstDueAt), movedBy(t))
	}
	fmt.Fprintf(w, "attempts     %d of %d\n", t.Attempts, t.MaxAttempts)
	if t.Priority != 0 {
		fmt.Fprintf(w, "priority     %d\n", t.Priority)
	}
	if t.Target != "" {
		fmt.Fprintf(w, "target       %s\n", t.Target)
	}
	fmt.Fprintf(w, "payload      %s\n", t.Payload)
	if t.LastError != "" {
		fmt.Fprintf(w, "last error   %s\n", t.LastError)
	}
	if len(t.Result) > 0 {
		fmt.Fprintf(w, "result       %s\n", t.Result)
	}
	fmt.Fprintf(w, "created      %s\n", t.CreatedAt.Local().Format(time.RFC3339Nano))
	if o := t.Outbox; o != nil {
		fmt.Fprintf(w, "outbox       %s, table %s (database %d), message %d\n", o.Outbox, o.Table, o.Database, o.MessageID)
		if o.HoldsBack > 0 {
			fmt.Fprintf(w, "holds back   %s\n", holdsBack(o))
		}
	}
}

// holdsBack says which messages wait for a relayed task: its key's later
// ones go one at a time, after it ends.
func holdsBack(o *apiv1.TaskOutbox) string {
	s := "s"
	if o.HoldsBack == 1 {
		s = ""
	}
	return fmt.Sprintf("%d later message%s of key %q, until this task ends (done, dead or cancelled)", o.HoldsBack, s, o.Key)
}

// movedBy says what moved a task's due time from its first, as the server
// recorded it (moved_by): never a guess from attempts or errors.
func movedBy(t *client.Task) string {
	switch t.MovedBy {
	case apiv1.MovedByRetry:
		if t.LastError != "" {
			return "a retry moved it (see last error)"
		}
		return "a retry moved it"
	case apiv1.MovedByUpdate:
		return "an update moved it (rescheduled)"
	case apiv1.MovedByRequeue:
		return "a requeue moved it"
	case "":
		return "moved since; by what, the server did not record"
	}
	return "moved by " + t.MovedBy
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

// runCall is the RunE of a verb that makes one call to the API and prints
// the answer: as JSON with --json, else with print.
func runCall[T any](g *globals, call func(cmd *cobra.Command, c *client.Client, args []string) (T, error), print func(io.Writer, T) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := g.client()
		if err != nil {
			return err
		}
		v, err := call(cmd, c, args)
		if err != nil {
			return err
		}
		if g.json {
			return g.printJSON(cmd, v)
		}
		return print(cmd.OutOrStdout(), v)
	}
}

// runOne is runCall for a verb whose call takes its single argument.
func runOne[T any](g *globals, call func(ctx context.Context, c *client.Client, arg string) (T, error), print func(io.Writer, T) error) func(*cobra.Command, []string) error {
	return runCall(g, func(cmd *cobra.Command, c *client.Client, args []string) (T, error) {
		return call(cmd.Context(), c, args[0])
	}, print)
}

// noErr adapts a printer whose write errors are not reported to runCall.
func noErr[T any](print func(io.Writer, T)) func(io.Writer, T) error {
	return func(w io.Writer, v T) error {
		print(w, v)
		return nil
	}
}

// readData reads --data: JSON, or @FILE for a file's JSON.
func readData(data string) (json.RawMessage, error) {
	raw := []byte(data)
	if name, ok := strings.CutPrefix(data, "@"); ok {
		var err error
		if raw, err = os.ReadFile(name); err != nil {
			return nil, usagef("--data: %w", err)
		}
	}
	if !json.Valid(raw) {
		return nil, usagef("--data: not valid JSON")
	}
	return raw, nil
}
