// Package testdb gives each test its own database on the real servers of the
// machine (PostgreSQL, MariaDB) or its own SQLite file, and removes it when
// the test ends. A server that does not answer fails the test: tests that
// need a service never skip.
//
// Servers are found at the addresses of the development machine, overridden
// by ONTIME_TEST_PG (a pgx URL for an admin database) and ONTIME_TEST_MYSQL
// (a go-sql-driver DSN without a database name).
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // driver for the admin connection
	_ "github.com/jackc/pgx/v5/stdlib" // driver for the admin connection
)

const (
	defaultPG    = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultMySQL = "root@tcp(127.0.0.1:3306)/"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Name returns a fresh database name: ontime_t_<12 hex>.
func Name() string { return Unique("ontime_t_") }

// Postgres creates a database for t and returns its URL (pgx syntax).
func Postgres(t testing.TB) string {
	t.Helper()
	admin := env("ONTIME_TEST_PG", defaultPG)
	return replaceDBName(admin, createDB(t, "pgx", admin, "PostgreSQL", " WITH (FORCE)"))
}

// createDB creates a database of a fresh name on the server of admin,
// dropped (with dropOptions) when t ends, and returns its name.
func createDB(t testing.TB, driver, admin, server, dropOptions string) string {
	t.Helper()
	db, err := sql.Open(driver, admin)
	if err != nil {
		t.Fatalf("testdb: %s admin dsn: %v", server, err)
	}
	// No idle admin connection is held for the test's life: the server's
	// connections are shared by every test running at once.
	db.SetMaxIdleConns(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := Name()
	for {
		_, err = db.ExecContext(ctx, "CREATE DATABASE "+name)
		if err == nil {
			break
		}
		// A server at its connection limit (PostgreSQL 53300 "too many
		// clients", MySQL 1040 "Too many connections") is busy with other
		// tests, not missing: wait for a connection to free.
		if msg := err.Error(); (strings.Contains(msg, "53300") || strings.Contains(msg, "Too many connections")) && ctx.Err() == nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		db.Close()
		t.Fatalf("testdb: %s at %s is required: %v", server, admin, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+dropOptions); err != nil {
			t.Logf("testdb: drop %s: %v", name, err)
		}
		db.Close()
	})
	return name
}

func replaceDBName(url, name string) string {
	// postgres://user@host:port/db?params
	q := ""
	if i := strings.IndexByte(url, '?'); i >= 0 {
		url, q = url[:i], url[i:]
	}
	i := strings.LastIndexByte(url, '/')
	if i < len("postgres://") {
		return url + "/" + name + q
	}
	return url[:i+1] + name + q
}

// MySQL creates a database for t and returns its go-sql-driver DSN.
func MySQL(t testing.TB) string {
	t.Helper()
	admin := env("ONTIME_TEST_MYSQL", defaultMySQL)
	return strings.TrimSuffix(admin, "/") + "/" + createDB(t, "mysql", admin, "MariaDB/MySQL", "")
}

// SQLite returns the path of a fresh SQLite file in t's temp dir.
func SQLite(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), Name()+".db")
}

// DSNs returns n fresh databases of the engine ("sqlite", "mysql",
// "postgres") for one multi-database topology.
func DSNs(t testing.TB, engine string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		switch engine {
		case "sqlite":
			out[i] = SQLite(t)
		case "mysql":
			out[i] = MySQL(t)
		case "postgres":
			out[i] = Postgres(t)
		default:
			panic(fmt.Sprintf("testdb: unknown engine %q", engine))
		}
	}
	return out
}

// Engines lists the engines every store test runs against.
var Engines = []string{"sqlite", "mysql", "postgres"}
