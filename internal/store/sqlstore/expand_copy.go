package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5/stdlib"
)

// The copy's pages, per engine (issue 30, performance). A page is what one
// stored cursor covers; a statement, what one INSERT writes.
//
//   - PostgreSQL: the page's last ID first (one query on the primary key),
//     then the page goes source → twin as one binary COPY TO STDOUT piped
//     into one COPY FROM STDIN, bytes the server wrote and reads, never
//     decoded here: one round trip each way, whatever the page's size,
//     and memory bounded by the pipe. A page written before a kill fails
//     the COPY as a unique violation and goes again by statements, which
//     replace it.
//   - MariaDB and SQLite: the page read as rows, written as multi-row
//     INSERTs of at most stmtRows rows (SQLite binds at most 32,766
//     parameters) and stmtBytes of payload (MariaDB's max_allowed_packet).
const (
	pagePostgres = 5000
	pageRows     = 1000
	stmtRows     = 1000
	stmtBytes    = 4 << 20
	// pageBytes bounds the payload bytes a statement page holds in memory.
	pageBytes = 32 << 20
)

// copyPageSize is the rows per copy page when the options name none.
func (s *Store) copyPageSize() int {
	if s.d.name == "postgres" {
		return pagePostgres
	}
	return pageRows
}

// movingLiteral is s.moving's predicate with its numbers in the text, for
// COPY, which takes no parameters.
func (s *Store) movingLiteral(from int) string {
	n := int64(s.cfg.Tables)
	return `shard_hash % ` + strconv.FormatInt(2*int64(from)*n, 10) + ` >= ` + strconv.FormatInt(int64(from)*n, 10)
}

// idLiteral reports whether id can stand in a statement's text as a
// quoted literal: IDs are ASCII letters and digits ("" before the first).
func idLiteral(id string) bool {
	if len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// copyPagePG copies the next page of the first pass, after ID after, of
// table t from src to dst by COPY; it returns the rows copied, the page's
// last ID and whether the table has more.
func (s *Store) copyPagePG(ctx context.Context, src, dst *sql.DB, t, after string, from, page int) (int, string, bool, error) {
	pred := s.movingLiteral(from)
	var hi sql.NullString
	var n int
	if err := src.QueryRowContext(ctx, `SELECT MAX(id), COUNT(*) FROM (SELECT id FROM `+t+` WHERE id > $1 AND `+pred+` ORDER BY id LIMIT `+strconv.Itoa(page)+`) p`, after).Scan(&hi, &n); err != nil {
		return 0, "", false, err
	}
	if n == 0 || !hi.Valid {
		return 0, "", false, nil
	}
	if !idLiteral(after) || !idLiteral(hi.String) {
		return 0, "", false, fmt.Errorf("copy %s: an ID unlike any ontime makes after %q", t, after)
	}
	rng := `id > '` + after + `' AND id <= '` + hi.String + `' AND ` + pred
	copied, err := pgPipe(ctx, src, dst,
		`COPY (SELECT `+cols+` FROM `+t+` WHERE `+rng+`) TO STDOUT (FORMAT binary)`,
		`COPY `+t+` (`+cols+`) FROM STDIN (FORMAT binary)`)
	if err != nil && uniqueViolation(err) {
		// Written before (a killed copy) or a key's stale live copy:
		// statements replace the rows.
		copied = 0
		pargs := []any{after, hi.String}
		for lo := after; ; {
			pargs[0] = lo
			got, last, more, err := s.copyPage(ctx, src, dst, t, `id > ? AND id <= ? AND `+pred, pargs, stmtRows, true)
			if err != nil {
				return 0, "", false, err
			}
			copied += int64(got)
			if !more {
				break
			}
			lo = last
		}
		err = nil
	}
	if err != nil {
		return 0, "", false, err
	}
	return int(copied), hi.String, n == page, nil
}

// pgPipe runs out (a COPY … TO STDOUT) on src and in (a COPY … FROM
// STDIN) on dst, the one's output the other's input, and returns the rows
// in wrote. A failure of either ends both: in's transaction writes
// nothing.
func pgPipe(ctx context.Context, src, dst *sql.DB, out, in string) (int64, error) {
	sc, err := src.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	dc, err := dst.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer dc.Close()
	pr, pw := io.Pipe()
	read := make(chan error, 1)
	go func() {
		err := sc.Raw(func(c any) error {
			pc, ok := c.(*stdlib.Conn)
			if !ok {
				return fmt.Errorf("copy: a PostgreSQL connection is a %T", c)
			}
			_, err := pc.Conn().PgConn().CopyTo(ctx, pw, out)
			return err
		})
		pw.CloseWithError(err) // nil: in reads EOF, the end of the data
		read <- err
	}()
	var n int64
	err = dc.Raw(func(c any) error {
		pc, ok := c.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("copy: a PostgreSQL connection is a %T", c)
		}
		tag, err := pc.Conn().PgConn().CopyFrom(ctx, pr, in)
		n = tag.RowsAffected()
		return err
	})
	// A writer still blocked on the pipe (in failed) is released.
	pr.CloseWithError(errors.New("copy: the destination stopped reading"))
	rerr := <-read
	if err != nil {
		return 0, err
	}
	return n, rerr
}
