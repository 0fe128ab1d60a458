package sqlstore

// The console's indexes (schema 19), for lists an operator asks of tables
// of millions of rows (issue 26: every page ≤ 100 ms at 10 M rows):
//
//	<t>_topic_status (topic, status, id, due_at)  a topic's tasks of one
//	    status in ID order — the dead letters of a topic, a topic's
//	    pending tasks — were a walk of (status, id) checking each row's
//	    topic: 1 in 200 matched with 200 topics, so a page read tens of
//	    thousands of rows per table. A topic's tasks of any status use it
//	    too (a range of the topic, sorted by ID). With due_at it covers the
//	    per-topic counts (COUNT, MIN(due_at) GROUP BY topic, status: the
//	    background counts of GET /v1/topics and the leader's gauges),
//	    which then read this index instead of every row with its payload.
//	<t>_due (due_at, id, status, topic)  a due range (GET
//	    /v1/tasks?due_after=&due_before=) was a walk of the whole table in
//	    ID order when the range is narrow. With status and topic it covers
//	    the Coming up histograms (DueHistogram): a range of it, where the
//	    scan index's range read every row for its topic (a 7-day histogram
//	    of 10 M rows took over 30 s on SQLite).
//
// Each index costs every write that moves its columns: the first every
// status change (claim, start, finish), the second every due change. Not
// on MariaDB: its planner chose a secondary index with the scan index's
// prefix for claims before (keys.go), and a claim planned on the wrong
// index locks every pending row of a segment; the console's lists there
// keep the plans they had.
func (s *Store) consoleIndexes() []string {
	if s.d.name == "mysql" {
		return nil
	}
	var stmts []string
	for _, t := range s.names {
		stmts = append(stmts,
			`CREATE INDEX IF NOT EXISTS `+t+`_topic_status ON `+t+` (topic, status, id, due_at)`,
			`CREATE INDEX IF NOT EXISTS `+t+`_due ON `+t+` (due_at, id, status, topic)`)
	}
	return stmts
}
