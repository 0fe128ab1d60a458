package scanjob

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// IndexCheck is what a job found when it EXPLAINed its fetch on its first
// table: whether an index serves the where filters and the key order, the
// index's name, and the plan as the engine printed it. Without one, DDL
// is a statement that creates it on the job's engine.
type IndexCheck struct {
	Table   string `json:"table"`
	OK      bool   `json:"ok"`
	Index   string `json:"index,omitempty"`
	Warning string `json:"warning,omitempty"`
	Plan    string `json:"plan,omitempty"`
	DDL     string `json:"ddl,omitempty"`
}

// indexCheck looks in the catalog of tg (table 0 of database 0), whose
// fetch EXPLAINed as plan, for an index whose leading columns are the
// where columns (any order) followed by the key: the one shape that
// serves `w = ? … AND key > ? ORDER BY key LIMIT n` as a range scan that
// stops after n rows. Without it every page reads past the rows already
// done.
func (s *source) indexCheck(ctx context.Context, tg target, plan string) IndexCheck {
	ic := IndexCheck{Table: tg.table, Plan: plan}
	idx, err := s.indexes(ctx, tg)
	if err != nil {
		ic.Warning = "reading the table's indexes failed: " + err.Error()
		return ic
	}
	want := slices.Clone(s.whereCols)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range idx {
			if !yield(k) {
				return
			}
		}
	}) {
		if serves(idx[name], want, s.spec.Key) {
			ic.OK, ic.Index = true, name
			return ic
		}
	}
	ic.DDL = s.indexDDL(tg.table, append(want, s.spec.Key))
	each := ""
	if len(s.dbs) > 1 || s.spec.Tables > 1 {
		each = " (and likewise on each of the job's tables)"
	}
	ic.Warning = fmt.Sprintf("no index of %s starts with (%s, %s): every page of the fetch reads rows the where filters discard; create one%s: %s",
		tg.table, strings.Join(want, ", "), s.spec.Key, each, ic.DDL)
	return ic
}

// indexDDL creates an index on table's cols, as the job's engine takes
// it: MySQL and SQLite need the index named (only PostgreSQL makes up a
// name), and identifiers are quoted as the fetch quotes them. The name is
// the table's and the columns' joined by "_", cut to the 63 bytes
// PostgreSQL keeps (MySQL allows 64) with a hash of the whole, so that
// two long names cut alike still differ.
func (s *source) indexDDL(table string, cols []string) string {
	name := table + "_" + strings.Join(cols, "_")
	if len(name) > 63 {
		h := fnv.New32a()
		h.Write([]byte(name))
		name = fmt.Sprintf("%s_%08x", name[:54], h.Sum32())
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = s.d.quote(c)
	}
	return "CREATE INDEX " + s.d.quote(name) + " ON " + s.d.quote(table) + " (" + strings.Join(quoted, ", ") + ")"
}

// serves: the index's first len(where) columns are the where columns, in
// any order, and the next one is the key.
func serves(cols, where []string, key string) bool {
	if len(cols) < len(where)+1 {
		return false
	}
	for _, c := range cols[:len(where)] {
		if !slices.Contains(where, c) {
			return false
		}
	}
	return cols[len(where)] == key
}

func (s *source) explain(ctx context.Context, db int, qs string, args []any) (string, error) {
	prefix := "EXPLAIN "
	if s.d.name == "sqlite" {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := s.dbs[db].QueryContext(ctx, prefix+qs, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var lines []string
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		var parts []string
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			if v == nil {
				continue
			}
			if len(cols) == 1 {
				parts = append(parts, fmt.Sprint(v))
				continue
			}
			parts = append(parts, cols[i]+"="+fmt.Sprint(v))
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// indexes reads the table's indexes: name → columns in order.
func (s *source) indexes(ctx context.Context, tg target) (map[string][]string, error) {
	db := s.dbs[tg.db]
	var q string
	switch s.d.name {
	case "mysql":
		q = `SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`
	case "postgres":
		q = `SELECT i.relname, a.attname
			FROM pg_index x
			JOIN pg_class c ON c.oid = x.indrelid
			JOIN pg_class i ON i.oid = x.indexrelid
			CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
			WHERE c.relname = $1 AND pg_table_is_visible(c.oid)
			ORDER BY i.relname, k.ord`
	default:
		return sqliteIndexes(ctx, db, tg.table)
	}
	rows, err := db.QueryContext(ctx, q, tg.table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name, col string
		if err := rows.Scan(&name, &col); err != nil {
			return nil, err
		}
		out[name] = append(out[name], col)
	}
	return out, rows.Err()
}

// sqliteIndexes is indexes on SQLite: one query for the index names, one
// per index for its columns.
func sqliteIndexes(ctx context.Context, db *sql.DB, table string) (map[string][]string, error) {
	out := map[string][]string{}
	// The table-valued pragma functions take the names as parameters.
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_index_list(?)`, table)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	for _, n := range names {
		cr, err := db.QueryContext(ctx, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, n)
		if err != nil {
			return nil, err
		}
		for cr.Next() {
			var c string
			if err := cr.Scan(&c); err != nil {
				cr.Close()
				return nil, err
			}
			out[n] = append(out[n], c)
		}
		cr.Close()
	}
	return out, nil
}
