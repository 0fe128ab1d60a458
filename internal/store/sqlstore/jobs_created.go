package sqlstore

import (
	"context"
	"database/sql"
	"time"
)

// Schema version 9: ontime_job_items.created_at, the time a node first
// took the item (Unix microseconds; TakeItem's insert writes it).
//
// A node that takes an item runs the latest fire time it missed (misfire
// fire_once) from the item's last fire time; an item that never fired had
// none, so a fire time that went by while the item moved between nodes
// before its first run was lost (issue 25 item 9). created_at bounds the
// fire times the item answers for from below: those after it were missed,
// those before it are from before the job had the item.
//
// Rows from before hold the migration's time: the item existed then at
// least, and a fire time missed since then was missed.
func (s *Store) migrateJobCreated(ctx context.Context, c *sql.Conn) error {
	if err := s.addColumn(ctx, c, "ontime_job_items", "created_at", "BIGINT NOT NULL DEFAULT 0"); err != nil {
		return err
	}
	_, err := c.ExecContext(ctx, s.d.rebind(`UPDATE ontime_job_items SET created_at = ? WHERE created_at = 0`), time.Now().UnixMicro())
	return err
}
