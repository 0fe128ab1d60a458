package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// scriptCall is one script call on one slot.
type scriptCall struct {
	keys []string
	args []any
}

// runScripts makes calls, each atomic on its slot, in one round trip: a
// pipeline of EVALSHA (on Redis Cluster, one pipeline per node, sent
// concurrently). A call Redis answers NOSCRIPT (its script cache was
// flushed or it restarted) is sent again alone, with the script's source.
// extra, when set, adds commands to the same pipeline (the registry's
// SADD). It returns the answers in calls' order, and the first error.
//
// Why: one call per slot in turn made a Pop, an Add and an Ack cost a
// round trip per slot touched (most of the 8 at 1,000 tasks/s), and on a
// loaded machine each round trip waits for redis-server to be scheduled:
// those waits, added up on the path between a task's pop and its
// delivery, are what the hot tier's lateness swung with.
func (t *Tier) runScripts(ctx context.Context, s *goredis.Script, calls []scriptCall, extra func(goredis.Pipeliner)) ([]*goredis.Cmd, error) {
	cmds := make([]*goredis.Cmd, len(calls))
	if len(calls) == 1 && extra == nil {
		cmds[0] = s.Run(ctx, t.rdb, calls[0].keys, calls[0].args...)
		return cmds, cmds[0].Err()
	}
	pipe := t.rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	if extra != nil {
		extra(pipe)
	}
	all, _ := pipe.Exec(ctx)
	var first error
	for i, c := range calls {
		if goredis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = s.Run(ctx, t.rdb, c.keys, c.args...)
		}
		if err := cmds[i].Err(); err != nil && first == nil {
			first = err
		}
	}
	for _, c := range all[min(len(calls), len(all)):] {
		if err := c.Err(); err != nil && first == nil {
			first = err
		}
	}
	return cmds, first
}
