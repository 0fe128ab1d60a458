package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/client"
)

func newSchedulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Manage schedules (periodic tasks)",
		Long: `Manage schedules: each fire time of a cron expression becomes an ordinary task
with key NAME@<RFC 3339 fire time>, made ahead of time and delivered like any
task, never early.`,
		Example: `  ontime schedules put nightly --cron "0 2 * * *" --tz Europe/Berlin --topic report.nightly
  ontime schedules list
  ontime schedules pause nightly`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("which verb? list, get, put, delete, pause, resume, trigger")
		},
	}
	cmd.AddCommand(newSchedulesListCmd(g), newSchedulesPutCmd(g), newSchedulesTriggerCmd(g))
	for _, v := range []scheduleVerbSpec{
		{use: "get NAME", short: "Show a schedule", long: `Show a schedule: its definition, state, next fire time and how far its fire
times have been made into tasks.`,
			call: func(ctx context.Context, c *client.Client, n string) (*client.Schedule, error) {
				return c.GetSchedule(ctx, n)
			}},
		{use: "delete NAME", short: "Delete a schedule", long: `Delete a schedule. Its tasks made ahead and not yet started are withdrawn
(cancelled, with the reason as their last error); a task already running is
delivered, a triggered one is kept. Prints the schedule as it was.`,
			call: func(ctx context.Context, c *client.Client, n string) (*client.Schedule, error) {
				return c.DeleteSchedule(ctx, n)
			}},
		{use: "pause NAME", short: "Pause a schedule", long: `Pause a schedule: no task is made; its tasks made ahead and not yet started are
withdrawn. Pausing a paused schedule changes nothing.`,
			call: func(ctx context.Context, c *client.Client, n string) (*client.Schedule, error) {
				return c.PauseSchedule(ctx, n)
			}},
		{use: "resume NAME", short: "Resume a paused schedule", long: `Resume a paused schedule from its next fire time after now: the fire times of
the pause are not owed.`,
			call: func(ctx context.Context, c *client.Client, n string) (*client.Schedule, error) {
				return c.ResumeSchedule(ctx, n)
			}},
	} {
		cmd.AddCommand(scheduleVerb(g, v))
	}
	return cmd
}

func newSchedulesListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every schedule",
		Long:  `List every schedule by name: cron expression, time zone, topic, state and next fire time.`,
		Example: `  ontime schedules list
  ontime schedules list --json | jq -r '.[].name'`,
		Args: noArgs,
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) ([]client.Schedule, error) {
			return c.ListSchedules(cmd.Context())
		}, func(w io.Writer, all []client.Schedule) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCRON\tTIME ZONE\tTOPIC\tSTATE\tNEXT FIRE")
			for _, s := range all {
				next := "-"
				if s.NextFireAt != nil {
					next = s.NextFireAt.Local().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.TimeZone, s.Task.Topic, scheduleState(&s), next)
			}
			return tw.Flush()
		}),
	}
}

func newSchedulesPutCmd(g *globals) *cobra.Command {
	var (
		req  client.ScheduleRequest
		data string
	)
	cmd := &cobra.Command{
		Use:   "put NAME --cron EXPR --topic TOPIC [flags]",
		Short: "Create a schedule or replace its definition",
		Long: `Create the schedule NAME, or replace its definition. --cron takes 5 fields
(minute first), 6 with seconds first, "@every 10s" or a descriptor such as
"@hourly"; --tz an IANA zone (default UTC). A replaced schedule keeps its
place: fire times already passed are not made again, and its tasks made
ahead are made anew under the new definition.

--misfire says what happens to fire times missed (no node up, or their tasks
made ahead starting later than the misfire threshold): skip (the default)
goes on with the next one; fire_once delivers one task for all of them.`,
		Example: `  ontime schedules put nightly --cron "0 2 * * *" --tz Europe/Berlin \
      --topic report.nightly --target https://reports.example/run --data '{"kind": "daily"}'
  ontime schedules put beat --cron "@every 10s" --topic beat --misfire fire_once`,
		Args: exactArgs(1, "schedule name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Cron == "" || req.Task.Topic == "" {
				return usagef("--cron and --topic are required")
			}
			if req.Task.MaxAttempts < 0 || (cmd.Flags().Changed("max-attempts") && req.Task.MaxAttempts < 1) {
				return usagef("--max-attempts: %d; at least 1", req.Task.MaxAttempts)
			}
			if err := oneOf("--misfire", req.Misfire, misfires); err != nil {
				return err
			}
			if data != "" {
				raw, err := readData(data)
				if err != nil {
					return err
				}
				req.Task.Payload = raw
			}
			req.Name = args[0]
			c, err := g.client()
			if err != nil {
				return err
			}
			s, created, err := c.PutSchedule(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(cmd, s)
			}
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "created schedule %s\n", s.Name)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "updated schedule %s\n", s.Name)
			}
			printSchedule(cmd.OutOrStdout(), s)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Cron, "cron", "", `cron expression: 5 fields, 6 with seconds first, "@every 10s", "@hourly" (required)`)
	f.StringVar(&req.TimeZone, "tz", "", "IANA time zone (default UTC)")
	f.StringVar(&req.Task.Topic, "topic", "", "topic of the tasks (required)")
	f.StringVar(&req.Task.Target, "target", "", "webhook URL or mq://BROKER/ADDRESS (empty: the topic's Go handler)")
	f.StringVar(&data, "data", "", "payload JSON, or @file")
	f.IntVar(&req.Task.MaxAttempts, "max-attempts", 0, "attempts before a task is dead (default: the server's)")
	f.StringVar(&req.Misfire, "misfire", "", "skip (default) or fire_once")
	f.BoolVar(&req.Paused, "paused", false, "store it paused")
	_ = cmd.RegisterFlagCompletionFunc("misfire", cobra.FixedCompletions(misfires, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// misfires are the values of --misfire: what a schedule does with fire
// times missed while no node ran it.
var misfires = []cobra.Completion{"skip", "fire_once"}

func newSchedulesTriggerCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "trigger NAME",
		Short: "Make one task of a schedule now",
		Long: `Make one task of the schedule now, outside its cron expression (a paused
schedule too), keyed NAME+trigger@<now>. A change or delete of the schedule
does not withdraw it. Prints the task.`,
		Example: `  ontime schedules trigger nightly`,
		Args:    exactArgs(1, "schedule name"),
		RunE: runOne(g, func(ctx context.Context, c *client.Client, name string) (*client.Task, error) {
			return c.TriggerSchedule(ctx, name)
		}, noErr(printTask)),
	}
}

type scheduleVerbSpec struct {
	use, short, long string
	call             func(ctx context.Context, c *client.Client, name string) (*client.Schedule, error)
}

// scheduleVerb makes a verb that takes one schedule name and prints the
// schedule.
func scheduleVerb(g *globals, s scheduleVerbSpec) *cobra.Command {
	verb, _, _ := strings.Cut(s.use, " ")
	return &cobra.Command{
		Use:     s.use,
		Short:   s.short,
		Long:    s.long,
		Example: "  ontime schedules " + verb + " nightly",
		Args:    exactArgs(1, "schedule name"),
		RunE:    runOne(g, s.call, noErr(printSchedule)),
	}
}

func scheduleState(s *client.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

func printSchedule(w io.Writer, s *client.Schedule) {
	fmt.Fprintf(w, "name             %s\n", s.Name)
	fmt.Fprintf(w, "cron             %s (%s)\n", s.Cron, s.TimeZone)
	fmt.Fprintf(w, "state            %s, misfire %s\n", scheduleState(s), s.Misfire)
	if s.NextFireAt != nil {
		fmt.Fprintf(w, "next fire        %s (%s)\n", s.NextFireAt.Local().Format(time.RFC3339), relative(*s.NextFireAt))
	}
	fmt.Fprintf(w, "scheduled until  %s\n", s.ScheduledUntil.Local().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "task topic       %s\n", s.Task.Topic)
	if s.Task.Target != "" {
		fmt.Fprintf(w, "task target      %s\n", s.Task.Target)
	}
	if len(s.Task.Payload) > 0 {
		fmt.Fprintf(w, "task payload     %s\n", s.Task.Payload)
	}
	if s.Task.MaxAttempts > 0 {
		fmt.Fprintf(w, "task attempts    %d\n", s.Task.MaxAttempts)
	}
}
