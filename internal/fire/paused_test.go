package fire_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontimehq/ontime/internal/fire"
	"github.com/ontimehq/ontime/internal/hot"
	"github.com/ontimehq/ontime/internal/stagetest"
	"github.com/ontimehq/ontime/internal/store"
	"github.com/ontimehq/ontime/internal/task"
)

type pauser struct {
	mu     sync.Mutex
	paused map[string]bool
}

func (p *pauser) Paused(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[topic]
}

// Entries of a paused topic that reach the fire stage (claimed before the
// pause, or by a node that had not read it yet) are handed back to the
// store pending, never started: no attempt is used and nothing is
// delivered; entries of other topics fire as usual.
func TestPausedTopicEntriesGoBackUnstarted(t *testing.T) {
	x := setup(t, 20*time.Millisecond)
	p := &pauser{paused: map[string]bool{"fire.paused": true}}
	f, err := fire.New(fire.Config{Store: x.st, Tier: x.tier, Planner: x.planner, Sender: x.send, Outcomes: x.exp,
		Drain: x.tier.Drain, Workers: 2, MaxLead: 20 * time.Millisecond, DeliveryLease: time.Minute, Paused: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	token := store.NewToken()
	due := time.Now().Add(50 * time.Millisecond)
	var news []store.NewTask
	for i := range 6 {
		topic := "fire.live"
		if i%2 == 0 {
			topic = "fire.paused"
		}
		news = append(news, stagetest.Claimed(stagetest.NewTask(t, topic, fmt.Sprintf("p-%d", i), due), node, token))
	}
	tasks := stagetest.Insert(t, x.st, news...)
	var entries []hot.Entry
	for _, tk := range tasks {
		entries = append(entries, x.planner.Entry(time.Now(), tk.ID, tk.Topic, tk.DueAt, tk.Token))
	}
	if err := x.tier.Add(x.ctx, entries...); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(x.ctx); err != nil {
		t.Fatal(err)
	}
	stagetest.Eventually(t, "the live topic's tasks sent", func() bool { return len(x.send.sent()) == 3 })
	for _, tk := range tasks {
		if tk.Topic == "fire.live" {
			stagetest.StatusIs(t, x.st, tk.ID, task.StatusRunning)
			continue
		}
		row := stagetest.StatusIs(t, x.st, tk.ID, task.StatusPending)
		if row.Attempts != 0 || row.Owner != "" || row.Token != 0 || x.send.times(tk.ID) != 0 {
			t.Fatalf("paused task: attempts %d, owner %q, token %d, sent %d times", row.Attempts, row.Owner, row.Token, x.send.times(tk.ID))
		}
	}
	stagetest.Eventually(t, "the tier empty (paused entries acked, not left to come back)", func() bool {
		n, err := x.tier.Len(x.ctx)
		return err == nil && n == 0
	})
}
