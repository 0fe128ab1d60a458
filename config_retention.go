package ontime

import (
	"fmt"
	"time"
)

// RetentionConfig says how long final tasks are kept. Rows are deleted
// after these durations from when they ended, by the owner of their
// sharding item, in small batches; key_hold is how long a final task keeps
// its key from a new task (a resubmit meanwhile returns the final task).
type RetentionConfig struct {
	Done      Duration `yaml:"done"`      // default 24h
	Cancelled Duration `yaml:"cancelled"` // default 24h
	Dead      Duration `yaml:"dead"`      // default 720h
	KeyHold   Duration `yaml:"key_hold"`  // default 10m
}

// Defaults and bounds of retention.
const (
	DefaultRetentionDone      = 24 * time.Hour
	DefaultRetentionCancelled = 24 * time.Hour
	DefaultRetentionDead      = 720 * time.Hour
	DefaultKeyHold            = 10 * time.Minute
	// MinRetention keeps a final row long enough to be read back by the
	// client that made it final; MaxRetention is ten years.
	MinRetention = time.Second
	MaxRetention = 10 * 365 * 24 * time.Hour
)

func defaultRetention() RetentionConfig {
	return RetentionConfig{Done: Duration(DefaultRetentionDone), Cancelled: Duration(DefaultRetentionCancelled),
		Dead: Duration(DefaultRetentionDead), KeyHold: Duration(DefaultKeyHold)}
}

func (r RetentionConfig) validate() error {
	for _, ck := range []struct {
		key string
		v   Duration
	}{{"retention.done", r.Done}, {"retention.cancelled", r.Cancelled}, {"retention.dead", r.Dead}} {
		if v := time.Duration(ck.v); v < MinRetention || v > MaxRetention {
			return fmt.Errorf("%s: %s is out of range %s..%s", ck.key, v, MinRetention, MaxRetention)
		}
	}
	if v := time.Duration(r.KeyHold); v < 0 || v > MaxRetention {
		return fmt.Errorf("retention.key_hold: %s is out of range 0s..%s", v, MaxRetention)
	}
	return nil
}
