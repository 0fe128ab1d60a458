package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits bound what a submitted task may carry. Zero fields take defaults.
type Limits struct {
	MaxPayloadBytes    int // default DefaultMaxPayloadBytes
	DefaultMaxAttempts int // default DefaultMaxAttempts
	// CheckTarget, when set, judges a target by the delivery policy (a
	// literal address that is denied, a host the rules deny); its error
	// is answered as a bad target.
	CheckTarget func(target string) error
	// Brokers judges mq:// targets against the configured brokers; nil:
	// none is configured, so every mq:// target is refused.
	Brokers BrokerTargets
	// TopicPriority, when set, gives a topic's default priority (ok false:
	// the topic sets none): a task submitted without a priority takes it,
	// else 0.
	TopicPriority func(topic string) (int, bool)
	// TopicTarget, when set, gives a topic's default target ("" none): a
	// task submitted without a target takes it, stored on the task. The
	// caller has judged it already (the config's topics section).
	TopicTarget func(topic string) string
	// TopicMaxAttempts, when set, gives a topic's max_attempts (0 none):
	// a task submitted without one takes it, else DefaultMaxAttempts.
	TopicMaxAttempts func(topic string) int
	// Handled, when set, says whether a live node has a Go handler for a
	// topic: a task without a target, of a topic with no default target,
	// is refused (ErrNoHandler) unless one has. Nil: not asked (the
	// task is accepted, as a library stage that knows no handlers must).
	Handled func(topic string) bool
}

// BrokerTargets checks that an mq://NAME/ADDRESS target names a configured
// broker and an address well formed for that broker's kind. Its error is
// the message of a FieldError on "target".
type BrokerTargets interface {
	CheckTarget(name, address string) error
}

const (
	DefaultMaxPayloadBytes = 1 << 20
	DefaultMaxAttempts     = 25
	MaxTopicLen            = 64
	MaxKeyLen              = 255
	MaxTargetLen           = 2048
	MaxAttemptsLimit       = 1000
	// MaxHorizon is how far ahead a task may be due; beyond it a due time is
	// almost surely a unit mistake (seconds for milliseconds).
	MaxHorizon = 10 * 365 * 24 * time.Hour
)

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxPayloadBytes <= 0 {
		l.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if l.DefaultMaxAttempts <= 0 {
		l.DefaultMaxAttempts = DefaultMaxAttempts
	}
	return l
}

// FieldError is bad input in one named field. The API answers it with 400
// (413 when Field is "payload" and TooLarge is set).
type FieldError struct {
	Field    string
	Message  string
	TooLarge bool
	// Err, when set, is the sentinel that says why (ErrNoHandler), for
	// errors.Is beside ErrInvalid.
	Err error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// ErrInvalid matches every *FieldError with errors.Is.
var ErrInvalid = errors.New("invalid task")

// ErrNoHandler refuses a task without a target whose topic no live node
// handles with a Go handler and has no default target in the config:
// nobody could deliver it. It comes as a *FieldError on "target".
var ErrNoHandler = errors.New("no live node handles the topic and it has no default target")

func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// NoHandlerError is the refusal of a task without a target whose topic
// nobody can deliver (ErrNoHandler).
func NoHandlerError(topic string) error {
	return &FieldError{Field: "target", Err: ErrNoHandler, Message: fmt.Sprintf(
		"is required: no live node has a Go handler for topic %q, and the config gives the topic no default target (topics.%s.target)", topic, topic)}
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Spec is what a submitter asks for, before validation.
type Spec struct {
	Topic   string
	Key     string
	DueAt   *time.Time     // at most one of DueAt and Delay
	Delay   *time.Duration // relative to now
	Payload []byte         // raw JSON; nil or empty means null
	// PayloadValid: the caller has checked that Payload is JSON (the
	// API's decoders have, with the rest of the body), so Validate does
	// not read it a second time.
	PayloadValid bool
	Target       string
	MaxAttempts  int // 0 means the default
	// Retry is the task's own retry policy; nil: its topic's, else the
	// node's, when it fails.
	Retry *RetrySpec
	// Priority, 0 to MaxPriority; nil: the topic's (Limits.TopicPriority),
	// else 0.
	Priority *int
	// Replace (if_exists: replace): a live task of the same topic and key
	// is updated with this spec's fields instead of returned unchanged.
	Replace bool
	// AwaitHandler accepts the task without a target even when no live
	// node handles its topic (Limits.Handled): a schedule's task, whose
	// definition was accepted before, waits for a handler visibly
	// rather than being refused, its fire time lost, while the only
	// handler's node restarts.
	AwaitHandler bool
}

// Validated is a Spec that passed validation, with its due time resolved.
type Validated struct {
	Topic       string
	Key         string
	DueAt       time.Time
	Payload     []byte
	Target      string
	MaxAttempts int
	Retry       string // the stored form of the task's own policy (Retry.Encode); "" none
	Priority    int
}

// Validate checks every field of s against l and resolves the due time
// against now. It is the one place where submitted input is judged.
func Validate(s Spec, l Limits, now time.Time) (Validated, error) {
	return validate(s, l.WithDefaults(), now, nil)
}

// Batch validates the specs of one submit, as Validate each. The tasks
// of a batch mostly share their target: a target equal to the one before
// it is judged once (its URL parsed, the delivery policy asked), not
// once per task.
type Batch struct {
	l    Limits
	now  time.Time
	memo targetMemo
}

// NewBatch starts validating the specs of one submit made at now.
func NewBatch(l Limits, now time.Time) *Batch {
	return &Batch{l: l.WithDefaults(), now: now}
}

// Validate is Validate(s, l, now) for one spec of the batch.
func (b *Batch) Validate(s Spec) (Validated, error) {
	return validate(s, b.l, b.now, &b.memo)
}

// targetMemo is the verdict on the last target judged.
type targetMemo struct {
	target string
	err    error
	set    bool
}

func validate(s Spec, l Limits, now time.Time, memo *targetMemo) (Validated, error) {
	if err := ValidateTopic(s.Topic); err != nil {
		return Validated{}, err
	}
	if len(s.Key) > MaxKeyLen {
		return Validated{}, fieldErr("key", "is %d bytes; at most %d", len(s.Key), MaxKeyLen)
	}
	if !utf8.ValidString(s.Key) {
		return Validated{}, fieldErr("key", "is not valid UTF-8")
	}
	for i := 0; i < len(s.Key); i++ {
		if s.Key[i] < 0x20 || s.Key[i] == 0x7f {
			return Validated{}, fieldErr("key", "contains a control character at byte %d", i)
		}
	}
	v := Validated{Topic: s.Topic, Key: s.Key, Target: s.Target}
	switch {
	case s.DueAt != nil && s.Delay != nil:
		return Validated{}, fieldErr("due_at", "give due_at or delay, not both")
	case s.DueAt != nil:
		if s.DueAt.IsZero() {
			return Validated{}, fieldErr("due_at", "is the zero time")
		}
		if s.DueAt.After(now.Add(MaxHorizon)) {
			return Validated{}, fieldErr("due_at", "is more than 10 years ahead")
		}
		v.DueAt = *s.DueAt
		if v.DueAt.Before(now) {
			v.DueAt = now // a past due time means "as soon as possible"
		}
	case s.Delay != nil:
		if *s.Delay < 0 {
			return Validated{}, fieldErr("delay", "is negative (%s)", *s.Delay)
		}
		if *s.Delay > MaxHorizon {
			return Validated{}, fieldErr("delay", "is more than 10 years")
		}
		v.DueAt = now.Add(*s.Delay)
	default:
		v.DueAt = now
	}
	v.DueAt = CeilMicro(v.DueAt)

	switch {
	case len(s.Payload) == 0:
		v.Payload = []byte("null")
	case len(s.Payload) > l.MaxPayloadBytes:
		return Validated{}, &FieldError{Field: "payload", TooLarge: true,
			Message: fmt.Sprintf("is %d bytes; at most %d", len(s.Payload), l.MaxPayloadBytes)}
	case !s.PayloadValid && !json.Valid(s.Payload):
		return Validated{}, fieldErr("payload", "is not valid JSON")
	default:
		v.Payload = s.Payload
	}
	if err := l.judgeTarget(s.Target, memo); err != nil {
		return Validated{}, err
	}
	switch {
	case s.MaxAttempts == 0:
		v.MaxAttempts = l.DefaultMaxAttempts
		if l.TopicMaxAttempts != nil {
			if n := l.TopicMaxAttempts(s.Topic); n > 0 {
				v.MaxAttempts = n
			}
		}
	case s.MaxAttempts < 0 || s.MaxAttempts > MaxAttemptsLimit:
		return Validated{}, fieldErr("max_attempts", "is %d; want 1 to %d", s.MaxAttempts, MaxAttemptsLimit)
	default:
		v.MaxAttempts = s.MaxAttempts
	}
	if s.Retry != nil {
		var err error
		if v.Retry, err = EncodeSpec("retry", *s.Retry); err != nil {
			return Validated{}, err
		}
	}
	switch {
	case s.Priority != nil:
		if p := *s.Priority; p < 0 || p > MaxPriority {
			return Validated{}, fieldErr("priority", "is %d; want 0 to %d", p, MaxPriority)
		}
		v.Priority = *s.Priority
	case l.TopicPriority != nil:
		if p, ok := l.TopicPriority(s.Topic); ok && p >= 0 && p <= MaxPriority {
			v.Priority = p
		}
	}
	// Last: every other field is judged before whether the task could be
	// delivered at all.
	if s.Target == "" {
		target, err := l.Untargeted(s.Topic, s.AwaitHandler)
		if err != nil {
			return Validated{}, err
		}
		v.Target = target
	}
	return v, nil
}

// Untargeted resolves the target of a task of topic given without one:
// the topic's default target when it has one (TopicTarget); else "" (its
// Go handler), when a live node handles the topic (Handled) or await is
// set; else ErrNoHandler.
func (l Limits) Untargeted(topic string, await bool) (string, error) {
	if l.TopicTarget != nil {
		if t := l.TopicTarget(topic); t != "" {
			return t, nil
		}
	}
	if l.Handled != nil && !await && !l.Handled(topic) {
		return "", NoHandlerError(topic)
	}
	return "", nil
}

// ValidateTopic checks a topic name: 1–64 of A-Z a-z 0-9 _ . -
func ValidateTopic(topic string) error {
	if topic == "" {
		return fieldErr("topic", "is required")
	}
	if len(topic) > MaxTopicLen {
		return fieldErr("topic", "is %d characters; at most %d", len(topic), MaxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fieldErr("topic", "has %q at position %d; allowed are A-Z a-z 0-9 _ . -", c, i)
		}
	}
	return nil
}

// ValidateTarget checks a target as Validate does: the syntax of every
// kind, and for mq:// targets that l.Brokers knows the broker and accepts
// the address.
func (l Limits) ValidateTarget(target string) error {
	name, address, isMQ, err := SplitMQTarget(target)
	if err != nil {
		return &FieldError{Field: "target", Message: err.Error()}
	}
	if !isMQ {
		return ValidateTarget(target)
	}
	if l.Brokers == nil {
		return fieldErr("target", "names broker %q, but no brokers are configured", name)
	}
	if err := l.Brokers.CheckTarget(name, address); err != nil {
		return &FieldError{Field: "target", Message: err.Error()}
	}
	return nil
}

// MQScheme prefixes a target delivered to a message broker:
// mq://NAME/ADDRESS, NAME a key of the config's brokers.
const MQScheme = "mq://"

// SplitMQTarget splits mq://NAME/ADDRESS. isMQ is false (and err nil) for
// any other target. ADDRESS is taken literally, without percent-decoding:
// everything after the slash that ends NAME, so AMQP's
// EXCHANGE/ROUTING_KEY keeps its own slash.
func SplitMQTarget(target string) (name, address string, isMQ bool, err error) {
	rest, ok := strings.CutPrefix(target, MQScheme)
	if !ok {
		return "", "", false, nil
	}
	if len(target) > MaxTargetLen {
		return "", "", true, fmt.Errorf("is %d bytes; at most %d", len(target), MaxTargetLen)
	}
	name, address, ok = strings.Cut(rest, "/")
	if !ok || address == "" {
		return "", "", true, fmt.Errorf("%q has no address: want mq://BROKER/ADDRESS", target)
	}
	if err := ValidateBrokerName(name); err != nil {
		return "", "", true, fmt.Errorf("%q: broker name %w", target, err)
	}
	if !utf8.ValidString(address) {
		return "", "", true, errors.New("address is not valid UTF-8")
	}
	for i, r := range address {
		if r < 0x20 || r == 0x7f || unicode.IsSpace(r) {
			return "", "", true, fmt.Errorf("address has %q at byte %d; control characters and spaces are not allowed", r, i)
		}
	}
	return name, address, true, nil
}

// ValidateBrokerName checks a broker's name (a key of the config's
// brokers): 1–64 of A-Z a-z 0-9 _ -
func ValidateBrokerName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("is %d characters; at most 64", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("has %q at position %d; allowed are A-Z a-z 0-9 _ -", c, i)
		}
	}
	return nil
}

// ValidateTarget checks a delivery target's syntax: empty (a Go handler
// registered for the topic), an absolute http:// or https:// URL, or
// mq://BROKER/ADDRESS (whether the broker exists is Limits.ValidateTarget's
// question).
func ValidateTarget(target string) error {
	if target == "" {
		return nil
	}
	if len(target) > MaxTargetLen {
		return fieldErr("target", "is %d bytes; at most %d", len(target), MaxTargetLen)
	}
	if _, _, isMQ, err := SplitMQTarget(target); isMQ {
		if err != nil {
			return &FieldError{Field: "target", Message: err.Error()}
		}
		return nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return fieldErr("target", "is not a URL: %v", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fieldErr("target", "has no host")
		}
		if u.User != nil {
			return fieldErr("target", "must not carry credentials in the URL")
		}
	default:
		return fieldErr("target", "scheme %q is not supported (want http, https, mq://BROKER/ADDRESS, or empty for a Go handler)", u.Scheme)
	}
	return nil
}

// judgeTarget checks a task's target: its form, then the delivery
// policy. A target equal to memo's is not judged again.
func (l Limits) judgeTarget(target string, memo *targetMemo) error {
	if memo != nil && memo.set && memo.target == target {
		return memo.err
	}
	err := l.ValidateTarget(target)
	if err == nil && target != "" && l.CheckTarget != nil {
		if cerr := l.CheckTarget(target); cerr != nil {
			err = fieldErr("target", "%v", cerr)
		}
	}
	if memo != nil {
		*memo = targetMemo{target: target, err: err, set: true}
	}
	return err
}

// CeilMicro rounds t up to the microsecond, the precision the stores and
// the Redis tier keep: rounding down would make a due time given in
// nanoseconds fire up to a microsecond before it.
func CeilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}
