package ontime

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/task"
	"github.com/ontimehq/ontime/internal/topics"
)

// TopicConfig is one topic's settings: topics: {NAME: {target,
// max_attempts, retry, priority, rate, concurrency, timeout}}. A task's
// own value wins over its topic's; PUT /v1/topics/{topic} sets the same
// fields over these (the dynamic layer, stored for every node); what
// neither sets is the node's (the delivery section's, or none).
type TopicConfig struct {
	// Target is the topic's default target: a task submitted without one
	// takes it, stored on the task (GET shows it, and a later change of
	// the config leaves the task as it was). It is judged as a task's
	// target is (the target policy, the configured brokers). A topic with
	// a default target delivers there even where a Go handler for it is
	// registered; one without accepts tasks without a target only while a
	// live node has a Go handler for it.
	Target string `yaml:"target"`
	// MaxAttempts is the max_attempts of the topic's tasks submitted
	// without one (1..1000); 0: delivery.max_attempts.
	MaxAttempts int `yaml:"max_attempts"`
	// Retry is the retry policy of the topic's tasks without one of
	// their own: {backoff: exponential|fixed, initial, max, jitter} or
	// {schedule: [10s, 1m, 10m], jitter}; nil: the node's.
	Retry *Retry `yaml:"retry"`
	// Priority is the priority (0..9) of the topic's tasks submitted
	// without one; nil: 0.
	Priority *int `yaml:"priority"`
	// Rate and Concurrency bound the topic's deliveries cluster wide
	// (per second, in flight); 0: no limit.
	Rate        float64 `yaml:"rate"`
	Concurrency int     `yaml:"concurrency"`
	// Timeout bounds each delivery attempt (a webhook call, a Go
	// handler's call) of the topic's tasks; 0: delivery.timeout.
	Timeout Duration `yaml:"timeout"`
}

// wire is tc in the API's form, which topics.ParseLayer validates.
func (tc TopicConfig) wire() apiv1.TopicSettings {
	out := apiv1.TopicSettings{Target: tc.Target, MaxAttempts: tc.MaxAttempts, Priority: tc.Priority, Rate: tc.Rate, Concurrency: tc.Concurrency}
	if tc.Retry != nil {
		r := *tc.Retry
		out.Retry = &r
	}
	if tc.Timeout != 0 {
		out.Timeout = time.Duration(tc.Timeout).String()
	}
	return out
}

// topicLayers is the config's layer of the topic settings, by topic.
func (c *Config) topicLayers() (map[string]topics.Layer, error) {
	out := make(map[string]topics.Layer, len(c.Topics))
	for _, name := range slices.Sorted(maps.Keys(c.Topics)) {
		l, err := topics.ParseLayer("topics."+name+".", c.Topics[name].wire(), nil)
		if err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return nil, fmt.Errorf("%s: %s", fe.Field, fe.Message)
			}
			return nil, err
		}
		out[name] = l
	}
	return out, nil
}

// validateTopics checks the topics section as far as the config alone
// can; errors name the key as topics.NAME.field.
func (c *Config) validateTopics() error {
	if len(c.Topics) == 0 {
		return nil
	}
	pol, err := c.targetPolicy(nil)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Topics)) {
		if err := task.ValidateTopic(name); err != nil {
			return fmt.Errorf("topics.%q: the name %s", name, fieldMessage(err))
		}
		tc := c.Topics[name]
		if tc.Target == "" {
			continue
		}
		key := "topics." + name + ".target"
		if err := task.ValidateTarget(tc.Target); err != nil {
			return fmt.Errorf("%s: %s", key, fieldMessage(err))
		}
		if broker, _, isMQ, _ := task.SplitMQTarget(tc.Target); isMQ {
			if _, ok := c.Brokers[broker]; !ok {
				return fmt.Errorf("%s: names broker %q, which brokers does not configure", key, broker)
			}
			continue
		}
		if err := pol.CheckTarget(tc.Target); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	}
	_, err = c.topicLayers()
	return err
}

// checkTopicTargets judges the topics' default targets as a submitted
// task's are (with the brokers built, their addresses too).
func (c *Config) checkTopicTargets(l task.Limits) error {
	for _, name := range slices.Sorted(maps.Keys(c.Topics)) {
		t := c.Topics[name].Target
		if t == "" {
			continue
		}
		if err := checkTarget(l, t); err != nil {
			return fmt.Errorf("topics.%s.target: %s", name, fieldMessage(err))
		}
	}
	return nil
}

// checkTarget judges a target as a submitted task's is: its syntax, its
// broker, the target policy.
func checkTarget(l task.Limits, t string) error {
	err := l.ValidateTarget(t)
	if err == nil && l.CheckTarget != nil {
		err = l.CheckTarget(t)
	}
	return err
}

// fieldMessage is a *task.FieldError's message without its field name.
func fieldMessage(err error) string {
	if fe, ok := err.(*task.FieldError); ok {
		return fe.Message
	}
	return err.Error()
}
