package ontime

import (
	"fmt"
	"net"
	"strconv"
)

// DebugConfig opens what an operator needs to profile a node.
type DebugConfig struct {
	// PprofListen, when set, serves Go's profiles (/debug/pprof/: CPU,
	// heap, goroutines, mutex and block) on this loopback host:port, apart
	// from the API: they show the process's memory and cost CPU, so they
	// are never on the API's port and never beyond the machine. Off by
	// default.
	PprofListen string `yaml:"pprof_listen"`
}

func (d DebugConfig) validate() error {
	if d.PprofListen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(d.PprofListen)
	if err != nil {
		return fmt.Errorf("debug.pprof_listen: %q is not host:port", d.PprofListen)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("debug.pprof_listen: port %q is not a number 0..65535", port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("debug.pprof_listen: %q is not a loopback address (127.0.0.1, ::1 or localhost): profiles show the process's memory", host)
	}
	return nil
}
