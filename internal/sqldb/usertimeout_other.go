//go:build !linux

package sqldb

import (
	"net"
	"time"
)

// setUserTimeout: TCP_USER_TIMEOUT is Linux's; elsewhere a connection to
// a lost host ends with the caller's deadline or the kernel's limits.
func setUserTimeout(net.Conn, time.Duration) {}
