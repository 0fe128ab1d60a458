package ontime

import (
	"io"
	"log/slog"
	"time"
)

// Logger builds the logger `ontime serve` uses from log_level and
// log_format: JSON lines (the default) or slog's key=value text.
func (c Config) Logger(w io.Writer) *slog.Logger {
	return newLogger(w, c.LogLevel, c.LogFormat)
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: readableDurations}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// readableDurations writes durations as "30s", as the config takes them:
// slog's JSON handler would write nanoseconds (30000000000).
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// LogValue logs a config duration as "30s".
func (d Duration) LogValue() slog.Value { return slog.StringValue(time.Duration(d).String()) }
