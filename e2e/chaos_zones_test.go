//go:build linux

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontimehq/ontime/client"
)

// TestChaosZoneLoss (issue 31 item 5): the loss of a data centre. Two
// zones on this machine, each a network namespace joined to a bridge in
// the root namespace by a veth pair; a private PostgreSQL primary in zone
// a with a synchronous streaming replica in zone b; three `ontime serve`
// nodes per zone (cluster.zone a|b, the database coordinator), whose one
// store.databases entry lists both hosts (libpq's multi-host form,
// target_session_attrs=read-write); a webhook receiver on the bridge,
// reachable from both zones; tasks submitted over HTTP to the live nodes
// and due throughout.
//
// Zone a is cut off (its veth taken down): its nodes, whose primary can
// commit nothing without its synchronous standby, must stop scanning
// within the lease (fenced). The test then does what an operator or
// Patroni does: stops the old primary (fencing it before anything heals),
// promotes the replica and lets it commit without a standby. Zone b's
// nodes find the new primary through the multi-host DSN and deliver
// everything acknowledged. Then the link comes back, the old primary is
// rebuilt as a replica of the new one (pg_basebackup), zone a's nodes
// rejoin, and the primary fails back to zone a (a clean switchover: b
// stopped, a promoted, b rebuilt as a's replica).
//
// It fails on a lost task (none may be: every acknowledged task was
// committed on both servers, or on the promoted one alone after the
// promotion) and on an early call; duplicates are allowed (a failover) and
// printed. It prints the time from the cut to zone a fenced, to the
// promotion, to the first delivery by zone b of a task acknowledged after the cut, and
// to full recovery (every task due before the promotion delivered).
// The short version (go test) runs with 2 s leases at 100 tasks/s, the
// full one (ONTIME_CHAOS=full, make chaos) with the default leases at
// 200/s and longer phases. It needs root (ip netns) and PostgreSQL's server
// binaries under /usr/lib/postgresql/*/bin.
func TestChaosZoneLoss(t *testing.T) {
	chaosParallel(t)
	if os.Geteuid() != 0 {
		t.Fatal("TestChaosZoneLoss needs root: it creates network namespaces (ip netns)")
	}
	rate := chaosSize(t, "ZONE_RATE", 100, 200)                                     // tasks per second
	phase := time.Duration(chaosSize(t, "ZONE_PHASE_SECONDS", 3, 15)) * time.Second // load between steps
	lo, hi := 400*time.Millisecond, 2*time.Second
	if chaosFull() {
		lo, hi = 2*time.Second, 10*time.Second
	}

	net2 := newZoneNet(t)
	pgA := newZonePG(t, net2, 0)
	pgA.initdb()
	pgA.start()
	pgA.psql("postgres", "CREATE DATABASE ontime")
	pgB := newZonePG(t, net2, 1)
	pgB.basebackupFrom(pgA)
	pgB.start()
	pgA.setSyncStandby("*")
	pgA.waitSyncStandby()

	dsn := fmt.Sprintf("postgres://postgres@%s:%d,%s:%d/ontime?sslmode=disable&target_session_attrs=read-write",
		net2.ip(0), zonePGPort, net2.ip(1), zonePGPort)
	yaml, leases := chaosYAML("postgres", []string{dsn}, "")
	yaml = strings.Replace(yaml, "  segments: 3\n", "  segments: 3\n  zones: [a]\n", 1)
	// The nodes listen on their zone's address, on a network only this
	// test reaches.
	yaml += "auth:\n  insecure: true\n"
	var cfgs [2]string
	for z := range 2 {
		y := strings.Replace(yaml, "  coordinator: database\n", "  coordinator: database\n  zone: "+zoneNames[z]+"\n", 1)
		cfgs[z] = writeChaosConfig(t, t.TempDir(), y)
	}

	rcv := newZoneReceiver(t, net2)
	cl := startZoneCluster(t, net2, cfgs)
	load := newChaosLoad(t, "zones", rcv.srv.URL, cl.addrs...)
	// A submit in flight when its node is cut off never hears back: give
	// up after a few seconds and send it (same key) to another node.
	for i, a := range cl.addrs {
		c, err := client.New("http://"+a, client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		load.clients[i] = c
	}

	// Steady load: batches of 10 round-robin to the nodes not marked down,
	// each task due lo–hi after its submission, until stopLoad.
	var stop atomic.Bool
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		const batch = 10
		every := time.Second * batch / time.Duration(rate)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; !stop.Load() && !load.gaveUp.Load(); i++ {
			now := time.Now().Round(0)
			dues := make([]time.Time, batch)
			for j := range dues {
				f := float64((i*batch+j)*7919%1000) / 1000
				dues[j] = now.Add(lo + time.Duration(f*float64(hi-lo)) + time.Duration(j*37%1000))
			}
			load.submit(t.Context(), dues)
			<-tick.C
		}
		load.finished.Store(true)
	}()
	stopLoad := func() { stop.Store(true); <-loadDone }
	defer func() {
		if !stop.Load() {
			stopLoad()
		}
	}()

	start := time.Now()
	var events []string
	event := func(format string, args ...any) {
		e := fmt.Sprintf("+%s ", time.Since(start).Round(time.Millisecond)) + fmt.Sprintf(format, args...)
		events = append(events, e)
		t.Log(e)
	}
	time.Sleep(phase)

	// The cut: zone a loses its link; the load balancer stops sending to it.
	for i := range 3 {
		load.setDown(i, true)
	}
	cut := time.Now().Round(0)
	before := load.acknowledged()
	net2.setLink(0, false)
	event("zone a cut off (%d submitted)", load.submitted())
	waitFor(t, 120*time.Second, "zone a's nodes fenced (scanning no item)", func() bool {
		for i := range 3 {
			if n, ok := cl.scannedIn(0, i); !ok || n != 0 {
				return false
			}
		}
		return true
	})
	fenced := time.Since(cut)
	event("zone a fenced: its 3 nodes scan no item")

	// The operator: fence the old primary, promote the replica, and let it
	// commit without a synchronous standby until zone a is back.
	pgA.stop("immediate")
	pgB.promote()
	pgB.setSyncStandby("")
	promoted := time.Now().Round(0)
	event("old primary stopped, replica promoted in zone b")
	var firstB time.Time
	waitFor(t, 120*time.Second, "a delivery by zone b of a task acknowledged after the cut", func() bool {
		var ok bool
		firstB, ok = rcv.firstFrom(load, 1, before)
		return ok
	})
	event("first delivery by zone b of a task acknowledged after the cut, at +%s", firstB.Sub(start).Round(time.Millisecond))
	time.Sleep(phase)

	// Heal: the link comes back, the old primary is rebuilt as a replica of
	// the new one, zone a's nodes (running all along) rejoin.
	net2.setLink(0, true)
	healed := time.Now()
	event("link up")
	pgA.wipe()
	pgA.basebackupFrom(pgB)
	pgA.start()
	pgB.setSyncStandby("*")
	pgB.waitSyncStandby()
	event("zone a's server is b's synchronous replica")
	waitFor(t, 120*time.Second, "zone a's nodes scanning again", func() bool {
		for i := range 3 {
			if n, ok := cl.scannedIn(0, i); !ok || n == 0 {
				return false
			}
		}
		return true
	})
	rejoined := time.Since(healed)
	for i := range 3 {
		load.setDown(i, false)
	}
	event("zone a's nodes rejoined and scan items")
	time.Sleep(phase)

	// Fail back: a clean switchover to zone a.
	pgB.stop("fast")
	failback := time.Now().Round(0)
	pgA.promote()
	pgA.setSyncStandby("")
	event("b stopped, a promoted")
	pgB.wipe()
	pgB.basebackupFrom(pgA)
	pgB.start()
	pgA.setSyncStandby("*")
	pgA.waitSyncStandby()
	event("zone b's server is a's synchronous replica again")
	time.Sleep(phase)
	stopLoad()
	event("load stopped (%d submitted)", load.submitted())

	rcv.settle(load, 5*time.Minute, 5*time.Second)
	res := rcv.count(load)
	for _, d := range rcv.duplicates(load, start, 20) {
		t.Logf("duplicated: %s", d)
	}
	for _, l := range rcv.latest(load, 5) {
		t.Logf("late: %s due +%s first delivered %s late (attempt %d, %d calls)", l.id, l.due.Sub(start).Round(time.Millisecond), l.late.Round(time.Millisecond), l.attempt, l.calls)
	}
	// Full recovery: every task due before the promotion delivered.
	recovered := rcv.lastFirstDelivery(load, func(due time.Time) bool { return due.Before(promoted) }).Sub(cut)
	afterFailback := rcv.countDue(load, func(due time.Time) bool { return !due.Before(failback) && due.Before(failback.Add(10*time.Second)) })
	chaosVerdict(t, "zone-loss", res, true, fmt.Sprintf(
		"cut→zone a fenced %s, →promotion %s, →first delivery by zone b of a task acknowledged after the cut %s, →every task due before the promotion delivered %s; heal→zone a's nodes scanning %s; fail back: tasks due ≤10 s after b stopped %d, lateness p99 %s max %s; events: %s; 3+3 nodes, %d tasks/s due %s–%s ahead; %s; %s",
		fenced.Round(time.Millisecond), promoted.Sub(cut).Round(time.Millisecond), firstB.Sub(cut).Round(time.Millisecond),
		recovered.Round(time.Millisecond), rejoined.Round(time.Millisecond),
		afterFailback.Submitted, afterFailback.P99.Round(time.Millisecond), afterFailback.Max.Round(time.Millisecond),
		strings.Join(events, "; "), rate, lo, hi, leases, load.failures()))
}

var zoneNames = [2]string{"a", "b"}

// zonePGPort: each zone's server listens on its own address, so both use
// PostgreSQL's usual port.
const zonePGPort = 5432

// zoneNet is two network namespaces, one per zone, each joined by a veth
// pair to a bridge in the root namespace on a /24 of its own. Taking a
// zone's root-side veth down cuts it off from the other zone and from the
// test (the receiver, the submits) alike.
type zoneNet struct {
	t      *testing.T
	bridge string
	ns     [2]string
	veth   [2]string // root-side ends
	prefix string    // "10.x.y."
}

func newZoneNet(t *testing.T) *zoneNet {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suf := hex.EncodeToString(b[:3])
	n := &zoneNet{t: t, bridge: "otb" + suf}
	// A /24 no interface of this machine is on (parallel runs pick others).
	addrs, err := exec.Command("ip", "-4", "-o", "addr").Output()
	if err != nil {
		t.Fatalf("ip addr: %v (TestChaosZoneLoss needs iproute2)", err)
	}
	for i := 0; ; i++ {
		n.prefix = fmt.Sprintf("10.%d.%d.", 200+int(b[3]+byte(i))%50, int(b[2]+byte(i*7)))
		if !strings.Contains(string(addrs), " "+n.prefix) {
			break
		}
	}
	for z := range 2 {
		n.ns[z] = "ontime-" + suf + "-" + zoneNames[z]
		n.veth[z] = "ot" + suf + zoneNames[z]
	}
	// Deleting a namespace destroys its veth (and the root-side end); the
	// bridge goes last.
	t.Cleanup(func() {
		for _, ns := range n.ns {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
		_ = exec.Command("ip", "link", "del", n.bridge).Run()
	})
	n.ip0("link", "add", n.bridge, "type", "bridge")
	// Its own address kept: a bridge otherwise takes its ports' lowest,
	// which the permanent neighbour entries below would then miss.
	n.ip0("link", "set", n.bridge, "address", n.mac("", n.bridge))
	n.ip0("addr", "add", n.prefix+"1/24", "dev", n.bridge)
	n.ip0("link", "set", n.bridge, "up")
	for z := range 2 {
		n.ip0("netns", "add", n.ns[z])
		n.ip0("link", "add", n.veth[z], "type", "veth", "peer", "name", n.veth[z]+"p", "netns", n.ns[z])
		n.ip0("link", "set", n.veth[z], "master", n.bridge, "up")
		n.ip0("-n", n.ns[z], "addr", "add", n.ip(z)+"/24", "dev", n.veth[z]+"p")
		n.ip0("-n", n.ns[z], "link", "set", n.veth[z]+"p", "up")
		n.ip0("-n", n.ns[z], "link", "set", "lo", "up")
	}
	// Every neighbour entry permanent: a cut link then drops packets, as a
	// lost data centre's network does (connections time out), instead of
	// failing address resolution, which answers "no route to host".
	macs := map[string]string{n.hostIP(): n.mac("", n.bridge)}
	for z := range 2 {
		macs[n.ip(z)] = n.mac(n.ns[z], n.veth[z]+"p")
	}
	for ip, mac := range macs {
		if ip != n.hostIP() {
			n.ip0("neigh", "replace", ip, "lladdr", mac, "dev", n.bridge, "nud", "permanent")
		}
		for z := range 2 {
			if ip != n.ip(z) {
				n.ip0("-n", n.ns[z], "neigh", "replace", ip, "lladdr", mac, "dev", n.veth[z]+"p", "nud", "permanent")
			}
		}
	}
	return n
}

// mac is the hardware address of dev in namespace ns ("": the root one).
func (n *zoneNet) mac(ns, dev string) string {
	n.t.Helper()
	args := []string{"-o", "link", "show", dev}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		n.t.Fatalf("ip link show %s: %v", dev, err)
	}
	f := strings.Fields(string(out))
	if i := slices.Index(f, "link/ether"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	n.t.Fatalf("no link/ether in %q", out)
	return ""
}

// ip is zone z's address.
func (n *zoneNet) ip(z int) string { return n.prefix + strconv.Itoa(z+2) }

// hostIP is the root namespace's address on the bridge.
func (n *zoneNet) hostIP() string { return n.prefix + "1" }

func (n *zoneNet) ip0(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// setLink takes zone z's link down (cut off) or up (healed).
func (n *zoneNet) setLink(z int, up bool) {
	n.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	n.ip0("link", "set", n.veth[z], state)
}

// dialIn connects to addr from inside zone z's namespace: a socket belongs
// to the namespace of the thread that made it, so it is made on a thread
// moved there (setns), which is then thrown away (never unlocked).
func (n *zoneNet) dialIn(ctx context.Context, z int, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f, err := os.Open("/var/run/netns/" + n.ns[z])
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", n.ns[z], err)}
			return
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// zonePG is a private PostgreSQL server run in a zone's namespace, as the
// postgres user, listening on the zone's address.
type zonePG struct {
	t    *testing.T
	net  *zoneNet
	zone int
	bin  string
	root string // owned by postgres; data in root/data
	uid  int
	gid  int
}

func newZonePG(t *testing.T, n *zoneNet, zone int) *zonePG {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("TestChaosZoneLoss needs PostgreSQL's server binaries under /usr/lib/postgresql/*/bin (scripts/services.sh installs them)")
	}
	sort.Strings(bins)
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("TestChaosZoneLoss runs PostgreSQL as the postgres user: %v", err)
	}
	p := &zonePG{t: t, net: n, zone: zone, bin: filepath.Dir(bins[len(bins)-1])}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	// Not t.TempDir: the postgres user cannot enter its parents.
	if p.root, err = os.MkdirTemp("", "ontime-zone-pg-"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p.root, p.uid, p.gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.command("pg_ctl", "-D", p.dir(), "-m", "immediate", "-w", "stop").Run()
		os.RemoveAll(p.root)
	})
	return p
}

func (p *zonePG) dir() string { return filepath.Join(p.root, "data") }

// command runs a PostgreSQL binary in the zone's namespace as postgres.
func (p *zonePG) command(name string, args ...string) *exec.Cmd {
	// ip netns exec needs root and PostgreSQL refuses it: setpriv drops
	// to postgres once ip has joined the namespace.
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.net.ns[p.zone], "setpriv", "--reuid", strconv.Itoa(p.uid), "--regid", strconv.Itoa(p.gid), "--clear-groups", "--", filepath.Join(p.bin, name)}, args...)...)
	cmd.Dir = p.root
	return cmd
}

func (p *zonePG) run(name string, args ...string) string {
	p.t.Helper()
	out, err := p.command(name, args...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("zone %s: %s %s: %v\n%s", zoneNames[p.zone], name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (p *zonePG) initdb() {
	p.t.Helper()
	p.run("initdb", "-D", p.dir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	// Both zones' addresses and the test's, for queries and replication.
	hba := fmt.Sprintf("host all all %s0/24 trust\nhost replication all %s0/24 trust\n", p.net.prefix, p.net.prefix)
	f, err := os.OpenFile(filepath.Join(p.dir(), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(hba); err != nil {
		p.t.Fatal(err)
	}
}

// basebackupFrom makes this server a streaming replica of primary: a copy
// of its data directory with standby.signal and primary_conninfo (-R).
func (p *zonePG) basebackupFrom(primary *zonePG) {
	p.t.Helper()
	p.run("pg_basebackup", "-h", primary.net.ip(primary.zone), "-p", strconv.Itoa(zonePGPort), "-U", "postgres",
		"-D", p.dir(), "-R", "-X", "stream", "--no-sync", "-c", "fast")
}

func (p *zonePG) wipe() {
	p.t.Helper()
	if err := os.RemoveAll(p.dir()); err != nil {
		p.t.Fatal(err)
	}
}

func (p *zonePG) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=%s -c port=%d -k %s -c fsync=off -c max_connections=200 -c wal_level=replica -c max_wal_senders=5 -c synchronous_commit=on -c wal_sender_timeout=5s -c wal_receiver_timeout=5s",
		p.net.ip(p.zone), zonePGPort, p.root)
	p.run("pg_ctl", "-D", p.dir(), "-l", filepath.Join(p.root, "log"), "-o", opts, "-w", "-t", "60", "start")
}

func (p *zonePG) stop(mode string) {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.dir(), "-m", mode, "-w", "-t", "60", "stop")
}

func (p *zonePG) promote() {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.dir(), "-w", "-t", "60", "promote")
}

// psql runs sql on db over the server's socket (it answers whether the
// zone is cut off or not).
func (p *zonePG) psql(db, sql string) string {
	p.t.Helper()
	return strings.TrimSpace(p.run("psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", p.root, "-p", strconv.Itoa(zonePGPort), "-U", "postgres", "-d", db, "-c", sql))
}

// setSyncStandby sets synchronous_standby_names ("*": any standby; "":
// commit without one) and reloads.
func (p *zonePG) setSyncStandby(names string) {
	p.t.Helper()
	p.psql("postgres", fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", names))
	p.psql("postgres", "SELECT pg_reload_conf()")
}

// waitSyncStandby waits until a standby replicates synchronously.
func (p *zonePG) waitSyncStandby() {
	p.t.Helper()
	waitFor(p.t, 120*time.Second, "a synchronous standby", func() bool {
		return p.psql("postgres", "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "1"
	})
}

// zoneCluster is three `ontime serve` processes in each zone's namespace.
type zoneCluster struct {
	t     *testing.T
	net   *zoneNet
	names []string
	addrs []string // a1 a2 a3 b1 b2 b3
	procs []*serveProc
}

func startZoneCluster(t *testing.T, n *zoneNet, cfgs [2]string) *zoneCluster {
	t.Helper()
	c := &zoneCluster{t: t, net: n}
	for z := range 2 {
		for i := range 3 {
			name := fmt.Sprintf("%s%d", zoneNames[z], i+1)
			addr := fmt.Sprintf("%s:%d", n.ip(z), 7101+i)
			cmd := exec.Command("ip", "netns", "exec", n.ns[z], ontimeBinary(t), "serve", "--config", cfgs[z])
			c.names = append(c.names, name)
			c.addrs = append(c.addrs, addr)
			c.procs = append(c.procs, spawnCmd(t, cmd, "ONTIME_LISTEN="+addr, "ONTIME_NODE_ID="+name))
		}
	}
	for i, p := range c.procs {
		api := newAPIClient(t, "http://"+c.addrs[i])
		p.waitReady(t, func() bool { return api.Health(t.Context()) == nil })
	}
	if dir := os.Getenv("ONTIME_CHAOS_LOGS"); dir != "" {
		t.Cleanup(func() {
			for i, p := range c.procs {
				path := filepath.Join(dir, fmt.Sprintf("%s-%s.log", t.Name(), c.names[i]))
				if err := os.WriteFile(path, []byte(p.log()), 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
	var items int
	waitFor(t, 120*time.Second, "nodes balanced", func() bool {
		v, ok := clusterView(t, c.addrs[0])
		if !ok {
			return false
		}
		items = len(v.Items)
		live := 0
		for _, nd := range v.Nodes {
			if nd.Live {
				live++
			}
		}
		// The store's one database is in zone a: its items go to a's nodes.
		return live == 6 && balanced(v, c.names[:3])
	})
	waitFor(t, 120*time.Second, "items handed over", func() bool {
		sum := 0
		for i := range 3 {
			n, ok := c.scannedIn(0, i)
			if !ok {
				return false
			}
			sum += n
		}
		return sum == items
	})
	return c
}

// scannedIn reads ontime_items_scanned of zone z's node i, from inside the
// zone (it answers while the zone is cut off).
func (c *zoneCluster) scannedIn(z, i int) (int, bool) {
	addr := c.addrs[z*3+i]
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.net.dialIn(ctx, z, addr) },
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ontime_items_scanned "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err == nil
		}
	}
	return 0, false
}

// zoneReceiver is a chaosReceiver listening on the bridge (both zones
// reach it) that also notes which zone made each delivery.
type zoneReceiver struct {
	*chaosReceiver
	net *zoneNet

	mu     sync.Mutex
	byZone [2][]zoneDelivery
}

type zoneDelivery struct {
	id string
	at time.Time
}

func newZoneReceiver(t *testing.T, n *zoneNet) *zoneReceiver {
	z := &zoneReceiver{net: n}
	z.chaosReceiver = &chaosReceiver{recs: map[string]*chaosRecord{}, reply: z.reply}
	ln, err := net.Listen("tcp", n.hostIP()+":0")
	if err != nil {
		t.Fatal(err)
	}
	z.srv = httptest.NewUnstartedServer(http.HandlerFunc(z.serve))
	z.srv.Listener.Close()
	z.srv.Listener = ln
	z.srv.Start()
	t.Cleanup(z.srv.Close)
	return z
}

func (z *zoneReceiver) reply(w http.ResponseWriter, r *http.Request, id string, _ int) bool {
	at := time.Now().Round(0)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	for zone := range 2 {
		if host == z.net.ip(zone) {
			z.mu.Lock()
			z.byZone[zone] = append(z.byZone[zone], zoneDelivery{id: id, at: at})
			z.mu.Unlock()
		}
	}
	return true
}

// firstFrom is the first delivery by zone z of a task acknowledged, and
// not among before (the tasks acknowledged earlier).
func (z *zoneReceiver) firstFrom(l *chaosLoad, zone int, before map[string]bool) (time.Time, bool) {
	z.mu.Lock()
	ds := slices.Clone(z.byZone[zone])
	z.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		if _, ok := l.due[d.id]; ok && !before[d.id] {
			return d.at, true
		}
	}
	return time.Time{}, false
}

// acknowledged is the set of tasks acknowledged so far.
func (l *chaosLoad) acknowledged() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]bool, len(l.due))
	for id := range l.due {
		m[id] = true
	}
	return m
}

// lastFirstDelivery is the latest first delivery among the acknowledged
// tasks whose due time keep accepts.
func (r *chaosReceiver) lastFirstDelivery(l *chaosLoad, keep func(time.Time) bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for id, due := range l.due {
		if rec := r.recs[id]; rec != nil && rec.oks > 0 && keep(due) && rec.firstOK.After(last) {
			last = rec.firstOK
		}
	}
	return last
}
