package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// settingsSummary is a topic's settings that are not the node's, for the
// list: "max_attempts=5 retry=schedule 10s,1m"; "-" when none.
func settingsSummary(t apiv1.Topic) string {
	if t.Settings == nil || t.Sources == nil {
		return "-"
	}
	var parts []string
	for _, f := range settingFields(*t.Settings, *t.Sources) {
		if f.source != "node" {
			parts = append(parts, f.name+"="+f.value)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

type settingField struct{ name, value, source string }

// settingFields lists a topic's effective settings with their sources.
func settingFields(s apiv1.TopicSettings, src apiv1.TopicSources) []settingField {
	target := s.Target
	if target == "" {
		target = "(none: a Go handler, or the task's own)"
	}
	prio := 0
	if s.Priority != nil {
		prio = *s.Priority
	}
	limit := func(v string) string {
		if v == "0" {
			return "no limit"
		}
		return v
	}
	return []settingField{
		{"target", target, src.Target},
		{"max_attempts", strconv.Itoa(s.MaxAttempts), src.MaxAttempts},
		{"retry", retryText(s.Retry), src.Retry},
		{"priority", strconv.Itoa(prio), src.Priority},
		{"rate", limit(strconv.FormatFloat(s.Rate, 'g', -1, 64)), src.Rate},
		{"concurrency", limit(strconv.Itoa(s.Concurrency)), src.Concurrency},
		{"timeout", s.Timeout, src.Timeout},
	}
}

// retryText is a policy in a line: "exponential 1s..1h jitter 0.2",
// "schedule 10s,1m jitter 0".
func retryText(r *apiv1.Retry) string {
	if r == nil {
		return "-"
	}
	var b strings.Builder
	switch {
	case len(r.Schedule) > 0:
		b.WriteString("schedule " + strings.Join(r.Schedule, ","))
	case r.Backoff == "fixed":
		b.WriteString("fixed " + r.Initial)
	default:
		b.WriteString("exponential " + r.Initial + ".." + r.Max)
	}
	if r.Jitter != nil {
		b.WriteString(" jitter " + strconv.FormatFloat(*r.Jitter, 'g', -1, 64))
	}
	return b.String()
}

func newTopicGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get TOPIC",
		Short: "Show a topic: its counts and its settings, with where each comes from",
		Long: `Show one topic, counted now, and each of its settings with its source: api
('ontime topics set', stored for every node), config (topics.NAME in the
config) or node (the delivery section's default, or none). A task's own
value wins over all of them.`,
		Example: "  ontime topics get order.cancel",
		Args:    exactArgs(1, "topic"),
		RunE: runOne(g, func(ctx context.Context, c *client.Client, topic string) (*apiv1.Topic, error) {
			return c.Topic(ctx, topic)
		}, func(w io.Writer, t *apiv1.Topic) error {
			printTopic(w, t)
			return nil
		}),
	}
}

// printTopic prints a topic's row and its settings, one a line.
func printTopic(w io.Writer, t *apiv1.Topic) {
	printTopics(w, []apiv1.Topic{*t})
	if t.Settings == nil || t.Sources == nil {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
	for _, f := range settingFields(*t.Settings, *t.Sources) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.name, f.value, f.source)
	}
	tw.Flush()
}

// retryFlags are the --retry-* flags of submit and topics set.
type retryFlags struct {
	r        apiv1.Retry
	jitter   float64
	schedule []string
}

// retryFlagNames are the flags retryFlags adds.
var retryFlagNames = []string{"retry-backoff", "retry-initial", "retry-max", "retry-jitter", "retry-schedule"}

func (rf *retryFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&rf.r.Backoff, "retry-backoff", "", "retry policy: exponential or fixed")
	f.StringVar(&rf.r.Initial, "retry-initial", "", "retry policy: first wait (fixed: every wait), e.g. 1s")
	f.StringVar(&rf.r.Max, "retry-max", "", "retry policy: exponential's cap, e.g. 1h")
	f.Float64Var(&rf.jitter, "retry-jitter", 0, "retry policy: spread of each wait, 0..1")
	f.StringSliceVar(&rf.schedule, "retry-schedule", nil, "retry policy: waits before each retry, comma separated (10s,1m,10m); the last repeats")
}

// policy is the policy the flags give, nil when none was given.
func (rf *retryFlags) policy(cmd *cobra.Command) *apiv1.Retry {
	f := cmd.Flags()
	given := false
	for _, n := range retryFlagNames {
		given = given || f.Changed(n)
	}
	if !given {
		return nil
	}
	r := rf.r
	r.Schedule = rf.schedule
	if f.Changed("retry-jitter") {
		j := rf.jitter
		r.Jitter = &j
	}
	return &r
}

func newTopicSetCmd(g *globals) *cobra.Command {
	var (
		in       apiv1.TopicSettings
		retry    retryFlags
		priority int
		clear    bool
	)
	cmd := &cobra.Command{
		Use:   "set TOPIC",
		Short: "Set a topic's settings for every node (PUT /v1/topics/{topic})",
		Long: `Set a topic's settings, for every node of the cluster (they are stored; each
node reads them within a second). The flags given replace whatever an
earlier 'set' stored; what they leave out is the config's (topics.NAME),
else the node's. --clear removes what 'set' stored. Prints the topic and
its settings. Bad values are refused naming the field.

A retry policy is a backoff (--retry-backoff exponential|fixed,
--retry-initial, --retry-max) or a schedule (--retry-schedule 10s,1m,10m:
the waits before the 1st, 2nd, 3rd … retry, the last one repeated), and
--retry-jitter (0..1) spreads each wait.`,
		Example: `  ontime topics set order.cancel --max-attempts 5 --retry-schedule 10s,1m,10m,1h
  ontime topics set billing --retry-backoff fixed --retry-initial 30s --timeout 5s
  ontime topics set billing --clear`,
		Args: exactArgs(1, "topic"),
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, args []string) (*apiv1.Topic, error) {
			f := cmd.Flags()
			changed := false
			for _, name := range append([]string{"target", "max-attempts", "priority", "rate", "concurrency", "timeout"}, retryFlagNames...) {
				changed = changed || f.Changed(name)
			}
			switch {
			case clear && changed:
				return nil, errors.New("--clear removes every setting; give no other flag with it")
			case !clear && !changed:
				return nil, errors.New("give a setting to set (see --help), or --clear")
			}
			if f.Changed("priority") {
				in.Priority = &priority
			}
			in.Retry = retry.policy(cmd)
			return c.PutTopic(cmd.Context(), args[0], in)
		}, func(w io.Writer, t *apiv1.Topic) error {
			printTopic(w, t)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in.Target, "target", "", "default target of the topic's tasks submitted without one")
	f.IntVar(&in.MaxAttempts, "max-attempts", 0, "max_attempts of the topic's tasks submitted without one (1..1000)")
	f.IntVar(&priority, "priority", 0, "priority of the topic's tasks submitted without one (0..9)")
	f.Float64Var(&in.Rate, "rate", 0, "most deliveries per second of the topic, cluster wide")
	f.IntVar(&in.Concurrency, "concurrency", 0, "most deliveries of the topic in flight, cluster wide")
	f.StringVar(&in.Timeout, "timeout", "", "bound of each delivery attempt (10ms..1h)")
	retry.add(cmd)
	f.BoolVar(&clear, "clear", false, "remove what 'set' stored: back to the config's settings")
	return cmd
}
