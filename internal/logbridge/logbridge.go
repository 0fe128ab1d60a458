// Package logbridge routes the logs of the client libraries ontime uses
// into its slog logger, so that one node writes one log in one format:
// go-redis prints plain-text lines to stderr by default and etcd's client
// writes through zap.
package logbridge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Redis adapts a slog logger to go-redis's logger (redis.SetLogger). Its
// messages are about connections failing and being replaced, which the
// client recovers from by itself: they are warnings.
type Redis struct{ Log *slog.Logger }

// Printf logs one go-redis message.
func (r Redis) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	r.Log.WarnContext(ctx, msg, "component", "go-redis")
}

// Zap returns a zap logger that writes into log, at the matching levels.
func Zap(log *slog.Logger) *zap.Logger {
	return zap.New(&zapCore{log: log})
}

type zapCore struct {
	log   *slog.Logger
	attrs []slog.Attr
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default: // error, dpanic, panic, fatal: zap itself panics or exits after
		return slog.LevelError
	}
}

func (c *zapCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), level(l))
}

func (c *zapCore) With(fs []zapcore.Field) zapcore.Core {
	return &zapCore{log: c.log, attrs: append(slices.Clip(c.attrs), attrs(fs)...)}
}

func (c *zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	as := append(slices.Clip(c.attrs), attrs(fs)...)
	if e.LoggerName != "" {
		as = append(as, slog.String("logger", e.LoggerName))
	}
	c.log.LogAttrs(context.Background(), level(e.Level), e.Message, as...)
	return nil
}

func (c *zapCore) Sync() error { return nil }

// attrs turns zap fields into slog attributes, in a stable order.
func attrs(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]slog.Attr, len(keys))
	for i, k := range keys {
		out[i] = slog.Any(k, enc.Fields[k])
	}
	return out
}
