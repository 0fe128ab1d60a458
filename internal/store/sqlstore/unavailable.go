package sqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontimehq/ontime/internal/store"
)

// unavailable reports whether err says the database could not be reached,
// as opposed to a statement it refused: callers answer the first with
// "retry later" (HTTP 503) and the second as a fault.
//
// Context errors are not counted: a caller that gave up or went away has
// learnt nothing about the database.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return false
	}
	// Dial failures (refused, unreachable, DNS, dial timeouts) and I/O on a
	// connection the server or network dropped; pgx's ConnectError wraps
	// the *net.OpError of its last attempt.
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		// A socket the server closed reads EOF; the drivers return it as is.
		io.EOF, io.ErrUnexpectedEOF,
		// pgx answers calls on a connection it closed after a socket failure.
		pgconn.ErrConnClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	// database/sql gives up with ErrBadConn once its retries found only
	// broken connections; go-sql-driver reports a dead one as ErrInvalidConn.
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-03: the server is shutting
		// down, crashed or starting; 53300: too many connections.
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08",
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "53300":
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		// 1040 too many connections, 1053 server shutdown in progress.
		return me.Number == 1040 || me.Number == 1053
	}
	return false
}

// classify marks *errp with store.ErrUnavailable when it is a connection-
// level failure; deferred by every method that reaches a database.
func classify(errp *error) {
	if unavailable(*errp) {
		*errp = fmt.Errorf("%w: %w", store.ErrUnavailable, *errp)
	}
}

// serverBusy reports a server that is reachable but not taking this
// connection yet: at its connection limit (PostgreSQL 53300, MySQL 1040)
// or starting up (57P03).
func serverBusy(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "53300" || pe.Code == "57P03"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1040
	}
	return false
}
