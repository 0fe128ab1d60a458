package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/client"
)

// statusOrder is the order the counts of a topic are shown in.
var statusOrder = []string{"pending", "claimed", "running", "done", "dead", "cancelled"}

func newTopicsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "List topics; pause, resume or requeue one",
		Long: `Without a subcommand, list every topic that has tasks or is paused: its tasks
per status, the due time of its oldest pending task (how far behind it is)
whether it is paused, and the settings its config (topics.NAME) or
'ontime topics set' gave it (the rest are the node's). The node counts in
the background (every task table, every few seconds while asked), so the
counts may be a few seconds old: the last line says when they were taken
(counted_at with --json, which prints the API's answer:
{"topics": [...], "counted_at": ...}).

A paused topic delivers nothing on any node of the cluster (every node
learns of a pause within a second); its tasks wait and are delivered once it
is resumed, the overdue ones at once.`,
		Example: `  ontime topics
  ontime topics pause order.cancel
  ontime topics resume order.cancel
  ontime topics requeue order.cancel
  ontime topics get order.cancel
  ontime topics set order.cancel --max-attempts 5 --retry-schedule 10s,1m,10m,1h
  ontime topics --json | jq '.topics[] | select(.paused)'`,
		Args: noArgs,
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, _ []string) (*apiv1.TopicList, error) {
			return c.TopicList(cmd.Context())
		}, noErr(printTopicList)),
	}
	cmd.AddCommand(
		topicChange(g, "pause", "Pause a topic cluster wide",
			`Pause a topic: no node claims or starts its tasks any more (those already
running finish); they wait, and their due times pass. Prints the topic.

A topic that has no task yet may be paused ahead of its first one; the
command says so on stderr (and "known": false with --json), since it may as
well be a misspelt name.`,
			func(ctx context.Context, c *client.Client, topic string) (*apiv1.Topic, error) {
				return c.PauseTopic(ctx, topic)
			}),
		topicChange(g, "resume", "Resume a paused topic",
			`Resume a paused topic: the tasks whose due time passed meanwhile are delivered
at once, the others at their due time. Prints the topic. The pause is
removed: a topic without tasks (one paused ahead of its first task, or by
mistake) is no longer listed.`,
			func(ctx context.Context, c *client.Client, topic string) (*apiv1.Topic, error) {
				return c.ResumeTopic(ctx, topic)
			}),
		newTopicGetCmd(g),
		newTopicSetCmd(g),
		&cobra.Command{
			Use:   "requeue TOPIC",
			Short: "Return every dead task of a topic to pending",
			Long: `Return every dead task of the topic to pending, due now, with a fresh set of
attempts, and print how many.`,
			Example: `  ontime topics requeue order.cancel`,
			Args:    exactArgs(1, "topic"),
			RunE: runOne(g, func(ctx context.Context, c *client.Client, topic string) (requeued, error) {
				n, err := c.RequeueTopic(ctx, topic)
				return requeued{apiv1.TopicRequeue{Requeued: n}, topic}, err
			}, func(w io.Writer, r requeued) error {
				fmt.Fprintf(w, "requeued %d dead tasks of %s\n", r.Requeued, r.topic)
				return nil
			}),
		},
	)
	return cmd
}

func topicChange(g *globals, verb, short, long string, call func(ctx context.Context, c *client.Client, topic string) (*apiv1.Topic, error)) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " TOPIC",
		Short:   short,
		Long:    long,
		Example: "  ontime topics " + verb + " order.cancel",
		Args:    exactArgs(1, "topic"),
		RunE: runCall(g, func(cmd *cobra.Command, c *client.Client, args []string) (*apiv1.Topic, error) {
			topic := args[0]
			t, err := call(cmd.Context(), c, topic)
			if err == nil && !t.Known {
				// Not an error (a pause may come before the first task), but
				// not silence either: a misspelt name pauses nothing in use.
				fmt.Fprintf(cmd.ErrOrStderr(), "ontime: topics %s: %s\n", verb, unknownTopicNote(verb, topic))
			}
			return t, err
		}, func(w io.Writer, t *apiv1.Topic) error {
			printTopics(w, []apiv1.Topic{*t})
			return nil
		}),
	}
}

// unknownTopicNote says what a pause or resume of a topic without tasks did.
func unknownTopicNote(verb, topic string) string {
	if verb == "pause" {
		return fmt.Sprintf("no task of topic %s exists yet; it is paused ahead of its first task (check the name; 'ontime topics resume %s' undoes it)", topic, topic)
	}
	return fmt.Sprintf("no task of topic %s exists; no pause is left under this name", topic)
}

// requeued is the answer of topics requeue: the API's, and the topic for
// the line printed.
type requeued struct {
	apiv1.TopicRequeue
	topic string
}

// printTopicList is the topics' table and when their counts were taken.
func printTopicList(w io.Writer, tl *apiv1.TopicList) {
	printTopics(w, tl.Topics)
	if !tl.CountedAt.IsZero() {
		fmt.Fprintf(w, "counted at %s (%s)\n", tl.CountedAt.Local().Format(time.RFC3339), relative(tl.CountedAt))
	}
}

func printTopics(w io.Writer, ts []apiv1.Topic) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "TOPIC\tPAUSED")
	for _, s := range statusOrder {
		fmt.Fprint(tw, "\t", s)
	}
	fmt.Fprintln(tw, "\tOLDEST PENDING DUE\tSETTINGS")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%v", t.Topic, t.Paused)
		for _, s := range statusOrder {
			fmt.Fprintf(tw, "\t%d", t.Counts[s])
		}
		due := "-"
		if t.OldestDueAt != nil {
			due = t.OldestDueAt.Local().Format(time.RFC3339) + " (" + relative(*t.OldestDueAt) + ")"
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", due, settingsSummary(t))
	}
	tw.Flush()
}
