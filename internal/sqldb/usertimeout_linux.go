package sqldb

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c: the kernel closes the
// connection when data it sent stays unacknowledged that long. A pooled
// connection to a primary whose data centre was lost (packets dropped, no
// reset) otherwise holds every statement sent on it until the caller's
// deadline, or for the kernel's retransmission limit (about 15 minutes)
// when the caller set none.
func setUserTimeout(c net.Conn, d time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}
