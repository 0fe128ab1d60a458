package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The store's recorded topology (schema version 17).
//
// Routing depends on the number and the order of the databases: a row of
// shard hash h lives in database (h mod M·N) / N. A config that lists the
// databases differently from the ones the rows were written under makes
// rows unreachable, or reachable twice: `cp a.db b.db` and a restart with
// [a.db, b.db] shows every task twice, and the copies that are not routed
// to stay claimed for good. So every database records who it is, and the
// store records which databases it has, in which order:
//
//	every database   store_id        random, the same in every database of one store
//	                 database_id     random, this database's own
//	                 database_index  its position in the store
//	                 store_databases M, and store_database.I the ID of database I
//	                                 (every database holds the list; the one of
//	                                 the highest topology_epoch is the truth)
//	                 topology_epoch  bumped by every change of the list
//
// Open compares the config with that record and refuses a mismatch with a
// message that says what differs and what fixes it (checkTopology). A
// store whose databases have no identity yet (new, or made before version
// 17) takes the config's list as its record.

// Meta keys of the recorded topology.
const (
	metaStoreID       = "store_id"
	metaDatabaseID    = "database_id"
	metaDatabaseIndex = "database_index"
	metaDatabases     = "store_databases"
	metaDatabasePre   = "store_database."
	metaEpoch         = "topology_epoch"
	// metaExpanding marks a database that an expansion prepared and has
	// not cut over yet: it belongs to the store but serves nothing.
	metaExpanding = "expanding"
)

// ErrTopology is wrapped by the error of a config whose databases do not
// match the store's recorded topology.
var ErrTopology = errors.New("store.databases does not match the store's recorded topology")

// identity is what one database records about itself and its store.
type identity struct {
	storeID, dbID string
	index         int
	expanding     bool
	epoch         int64
	list          []string // the store's database IDs, in order
}

// known: the database has its whole identity. Keys are written in one
// transaction (insertMeta), so a node reading while another records sees
// all or none of them; index is checked too for stores recorded before.
func (id identity) known() bool { return id.storeID != "" && id.dbID != "" && id.index >= 0 }

// readMeta reads the whole ontime_meta table of db.
func readMeta(ctx context.Context, db querier) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT k, v FROM ontime_meta`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	meta := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		meta[k] = v
	}
	return meta, rows.Err()
}

// readIdentity reads what database db records of the topology.
func readIdentity(ctx context.Context, db querier) (identity, error) {
	meta, err := readMeta(ctx, db)
	if err != nil {
		return identity{}, err
	}
	return parseIdentity(meta)
}

func parseIdentity(meta map[string]string) (identity, error) {
	id := identity{storeID: meta[metaStoreID], dbID: meta[metaDatabaseID], index: -1, expanding: meta[metaExpanding] == "1"}
	if v, ok := meta[metaDatabaseIndex]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return identity{}, fmt.Errorf("ontime_meta holds database_index %q", v)
		}
		id.index = n
	}
	if v, ok := meta[metaEpoch]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return identity{}, fmt.Errorf("ontime_meta holds topology_epoch %q", v)
		}
		id.epoch = n
	}
	if v, ok := meta[metaDatabases]; ok {
		m, err := strconv.Atoi(v)
		if err != nil || m < 0 {
			return identity{}, fmt.Errorf("ontime_meta holds store_databases %q", v)
		}
		for i := range m {
			dbid, ok := meta[metaDatabasePre+strconv.Itoa(i)]
			if !ok {
				return identity{}, fmt.Errorf("ontime_meta records %d databases but not database %d", m, i)
			}
			id.list = append(id.list, dbid)
		}
	}
	return id, nil
}

func newRandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// insertMetaIfAbsent is the statement that writes a meta key unless it is
// there: nodes starting at once on a new store agree on the first writer's
// value.
func (s *Store) insertMetaIfAbsent() string {
	if s.d.name == "mysql" {
		return `INSERT INTO ontime_meta (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE k = k`
	}
	return s.d.rebind(`INSERT INTO ontime_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING`)
}

// insertMeta writes the meta keys of db that are absent, in one
// transaction: nodes recording a new store at once see each other's keys
// whole or not at all, and agree on the first writer's values.
func (s *Store) insertMeta(ctx context.Context, db *sql.DB, kv ...string) error {
	return withRetry(ctx, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i := 0; i+1 < len(kv); i += 2 {
			if _, err := tx.ExecContext(ctx, s.insertMetaIfAbsent(), kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
}

// setMeta writes meta keys of one database in one transaction.
func (s *Store) setMeta(ctx context.Context, db *sql.DB, kv ...string) error {
	return withRetry(ctx, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i := 0; i+1 < len(kv); i += 2 {
			if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.upsertMeta), kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
}

// listMeta is the meta keys that record list at epoch.
func listMeta(list []string, epoch int64) []string {
	kv := []string{metaDatabases, strconv.Itoa(len(list)), metaEpoch, strconv.FormatInt(epoch, 10)}
	for i, id := range list {
		kv = append(kv, metaDatabasePre+strconv.Itoa(i), id)
	}
	return kv
}

// checkTopology compares the configured databases with the store's
// recorded topology, recording it first when no database has an identity
// yet (a new store, or one made before schema version 17).
func (s *Store) checkTopology(ctx context.Context) error {
	ids := make([]identity, len(s.w))
	for i, db := range s.w {
		id, err := readIdentity(ctx, db)
		if err != nil {
			return fmt.Errorf("store.databases[%d]: %w", i, err)
		}
		ids[i] = id
	}
	ref := reference(ids)
	if ref < 0 || len(ids[ref].list) == 0 {
		// No database records a list: a new store, or one being recorded
		// by a node that stopped half way (every identity is then of one
		// store and at its own position).
		if err := s.recordTopology(ctx, ids); err != nil {
			return err
		}
		return nil
	}
	return topologyMismatch(ids, ids[ref])
}

// reference is the configured database whose record is the newest (the
// highest epoch; the first listed among equals), or -1 when none has an
// identity.
func reference(ids []identity) int {
	ref := -1
	for i, id := range ids {
		if !id.known() || id.expanding {
			continue
		}
		if ref < 0 || id.epoch > ids[ref].epoch || (len(ids[ref].list) == 0 && len(id.list) > 0) {
			ref = i
		}
	}
	return ref
}

// recordTopology gives every database its identity and records the list
// in each: the config's order becomes the store's.
func (s *Store) recordTopology(ctx context.Context, ids []identity) error {
	storeID := ""
	for i, id := range ids {
		switch {
		case id.expanding:
			return fmt.Errorf("%w: store.databases[%d] was prepared by `ontime store expand` for another store's expansion; give store.databases the store's own databases", ErrTopology, i)
		case id.known() && id.index != i:
			return fmt.Errorf("%w: store.databases[%d] was recorded at position %d; list the databases in the order they were first started with", ErrTopology, i, id.index)
		case id.known() && storeID != "" && id.storeID != storeID:
			return fmt.Errorf("%w: store.databases[%d] belongs to another ontime store (store ID %s, not %s)", ErrTopology, i, id.storeID, storeID)
		case id.known():
			storeID = id.storeID
		}
	}
	// The first database decides the store ID: two nodes recording at
	// once agree on whichever wrote first.
	if storeID == "" {
		storeID = newRandomID()
	}
	if _, err := s.w[0].ExecContext(ctx, s.insertMetaIfAbsent(), metaStoreID, storeID); err != nil {
		return fmt.Errorf("store.databases[0]: record topology: %w", err)
	}
	first, err := readIdentity(ctx, s.w[0])
	if err != nil {
		return fmt.Errorf("store.databases[0]: %w", err)
	}
	storeID = first.storeID
	list := make([]string, len(s.w))
	for i, db := range s.w {
		if err := s.insertMeta(ctx, db, metaStoreID, storeID, metaDatabaseID, newRandomID(), metaDatabaseIndex, strconv.Itoa(i)); err != nil {
			return fmt.Errorf("store.databases[%d]: record topology: %w", i, err)
		}
		id, err := readIdentity(ctx, db)
		if err != nil {
			return fmt.Errorf("store.databases[%d]: %w", i, err)
		}
		if id.storeID != storeID || id.index != i {
			return fmt.Errorf("%w: store.databases[%d] belongs to store %s at position %d, not to store %s at position %d", ErrTopology, i, id.storeID, id.index, storeID, i)
		}
		for j := range i {
			if list[j] == id.dbID {
				return fmt.Errorf("%w: store.databases[%d] and store.databases[%d] are one database (database ID %s): give each entry its own database", ErrTopology, j, i, id.dbID)
			}
		}
		list[i] = id.dbID
	}
	for i, db := range s.w {
		if err := s.insertMeta(ctx, db, listMeta(list, 1)...); err != nil {
			return fmt.Errorf("store.databases[%d]: record topology: %w", i, err)
		}
	}
	// Another node may have recorded first: check against what is there.
	for i, db := range s.w {
		id, err := readIdentity(ctx, db)
		if err != nil {
			return fmt.Errorf("store.databases[%d]: %w", i, err)
		}
		ids[i] = id
	}
	if err := topologyMismatch(ids, ids[reference(ids)]); err != nil {
		return err
	}
	s.log.Info("store topology recorded", "store_id", storeID, "databases", len(list))
	return nil
}

// topologyMismatch compares the configured databases' identities with the
// recorded list of ref and describes every difference, with the fix.
func topologyMismatch(ids []identity, ref identity) error {
	list := ref.list
	pos := map[string]int{}
	for i, id := range list {
		pos[id] = i
	}
	var what []string
	var fix []string
	seen := map[string]int{}
	present := map[string]bool{}
	misordered, added, foreign, copied, expanding := false, false, false, false, false
	for i, id := range ids {
		switch {
		case !id.known():
			what = append(what, fmt.Sprintf("store.databases[%d] is an empty database that is not part of the store", i))
			added = true
		case id.storeID != ref.storeID:
			what = append(what, fmt.Sprintf("store.databases[%d] belongs to another ontime store (store ID %s; this store is %s)", i, id.storeID, ref.storeID))
			foreign = true
		case seenAt(seen, id.dbID) >= 0:
			what = append(what, fmt.Sprintf("store.databases[%d] is the same database as store.databases[%d], or a copy of it (database ID %s)", i, seen[id.dbID], id.dbID))
			copied = true
		case id.expanding:
			what = append(what, fmt.Sprintf("store.databases[%d] is being added by `ontime store expand`, which has not cut over yet", i))
			expanding = true
		default:
			k, ok := pos[id.dbID]
			switch {
			case !ok:
				what = append(what, fmt.Sprintf("store.databases[%d] (database ID %s) is not in the store's list", i, id.dbID))
				foreign = true
			case k != i:
				what = append(what, fmt.Sprintf("store.databases[%d] is the store's database %d", i, k))
				misordered = true
			}
			present[id.dbID] = true
		}
		if id.known() {
			if _, ok := seen[id.dbID]; !ok {
				seen[id.dbID] = i
			}
		}
	}
	var missing []string
	for k, id := range list {
		if !present[id] {
			missing = append(missing, fmt.Sprintf("%d (database ID %s)", k, id))
		}
	}
	if len(missing) > 0 {
		what = append(what, fmt.Sprintf("the store's database %s is missing from store.databases", strings.Join(missing, ", ")))
	}
	if len(what) == 0 {
		return nil
	}
	switch {
	case copied:
		fix = append(fix, "a copied database is not a new one: give each entry of store.databases its own database, and grow the store with `ontime store expand --databases DSN…`, which copies the rows that move and deletes the copies left behind")
	case added || expanding:
		fix = append(fix, "to add databases, start the nodes with the store's databases and run `ontime store expand --databases DSN…`; `ontime store status` shows an expansion under way")
	}
	if misordered {
		fix = append(fix, "list the databases in the store's order: a database's position decides which rows it holds")
	}
	if len(missing) > 0 && !misordered {
		fix = append(fix, "put the missing databases back in store.databases at their positions: a store cannot shrink, and the rows they hold are reachable only there")
	}
	if foreign {
		fix = append(fix, "remove the databases of another store from store.databases")
	}
	return fmt.Errorf("%w (%d databases, store ID %s): %s; %s", ErrTopology, len(list), ref.storeID, strings.Join(what, "; "), strings.Join(fix, "; "))
}

func seenAt(seen map[string]int, id string) int {
	if i, ok := seen[id]; ok {
		return i
	}
	return -1
}

// createExpansion makes the table of an expansion's progress (expand.go):
// one row per task table of a source database, with its phase, the last
// ID copied (the keyset cursor of the copy) and the rows copied and
// deleted. In every database like the coordinator's tables; the first
// one's is used.
var createExpansion = map[string][]string{
	"sqlite": {`CREATE TABLE IF NOT EXISTS ontime_expansion (src INTEGER NOT NULL, tbl INTEGER NOT NULL, phase INTEGER NOT NULL,
		after_id TEXT NOT NULL DEFAULT '', copied INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (src, tbl))`},
	"mysql": {`CREATE TABLE IF NOT EXISTS ontime_expansion (src INT NOT NULL, tbl INT NOT NULL, phase SMALLINT NOT NULL,
		after_id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '', copied BIGINT NOT NULL DEFAULT 0, deleted BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (src, tbl)) ENGINE=InnoDB`,
		// An expansion records its new databases' DSNs in ontime_meta.
		`ALTER TABLE ontime_meta MODIFY v TEXT NOT NULL`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_expansion (src INT NOT NULL, tbl INT NOT NULL, phase SMALLINT NOT NULL,
		after_id TEXT COLLATE "C" NOT NULL DEFAULT '', copied BIGINT NOT NULL DEFAULT 0, deleted BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (src, tbl))`},
}

// createUsers makes the table of the nodes using the store (MarkInUse),
// whatever their coordinator: a cutover refuses while one is fresh.
var createUsers = map[string][]string{
	"sqlite":   {`CREATE TABLE IF NOT EXISTS ontime_store_users (node_id TEXT NOT NULL PRIMARY KEY, epoch INTEGER NOT NULL, at INTEGER NOT NULL)`},
	"mysql":    {`CREATE TABLE IF NOT EXISTS ontime_store_users (node_id VARCHAR(128) NOT NULL PRIMARY KEY, epoch BIGINT NOT NULL, at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_store_users (node_id TEXT COLLATE "C" NOT NULL PRIMARY KEY, epoch BIGINT NOT NULL, at BIGINT NOT NULL)`},
}

// createExpandGone makes the table of the moving rows deleted while an
// expansion copies (expand.go, purged): their IDs, written in the
// transaction that deletes them, so the copy deletes them from the twin.
var createExpandGone = map[string][]string{
	"sqlite":   {`CREATE TABLE IF NOT EXISTS ontime_expand_gone (id TEXT NOT NULL PRIMARY KEY)`},
	"mysql":    {`CREATE TABLE IF NOT EXISTS ontime_expand_gone (id CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY) ENGINE=InnoDB`},
	"postgres": {`CREATE TABLE IF NOT EXISTS ontime_expand_gone (id TEXT COLLATE "C" NOT NULL PRIMARY KEY)`},
}
