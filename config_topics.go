package ontime

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ontimehq/ontime/internal/task"
)

// TopicConfig is one topic's settings: topics: {NAME: {target}}.
type TopicConfig struct {
	// Target is the topic's default target: a task submitted without one
	// takes it, stored on the task (GET shows it, and a later change of
	// the config leaves the task as it was). It is judged as a task's
	// target is (the target policy, the configured brokers). A topic with
	// a default target delivers there even where a Go handler for it is
	// registered; one without accepts tasks without a target only while a
	// live node has a Go handler for it.
	Target string `yaml:"target"`
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
	return nil
}

// checkTopicTargets judges the topics' default targets as a submitted
// task's are (with the brokers built, their addresses too).
func (c *Config) checkTopicTargets(l task.Limits) error {
	for _, name := range slices.Sorted(maps.Keys(c.Topics)) {
		t := c.Topics[name].Target
		if t == "" {
			continue
		}
		err := l.ValidateTarget(t)
		if err == nil && l.CheckTarget != nil {
			err = l.CheckTarget(t)
		}
		if err != nil {
			return fmt.Errorf("topics.%s.target: %s", name, fieldMessage(err))
		}
	}
	return nil
}

// topicTarget is the default target of topic ("" none).
func (c *Config) topicTarget(topic string) string { return c.Topics[topic].Target }

// fieldMessage is a *task.FieldError's message without its field name.
func fieldMessage(err error) string {
	if fe, ok := err.(*task.FieldError); ok {
		return fe.Message
	}
	return err.Error()
}
