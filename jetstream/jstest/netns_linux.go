//go:build linux

package jstest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netLab is a small private network: a hub namespace holding a bridge, and one
// namespace per node with eth0 (10.201.0.N/24) paired to vN on the bridge. Nothing
// is created in the test process's own namespace; deleting the namespaces deletes
// every link.
type netLab struct {
	hub   string
	nodes []string
}

var labSeq atomic.Int64

// labPrefix names a lab's namespaces: rljs<pid>-<seq>, so a later run can tell a
// leftover of a dead process (removed by newNetLab) from one in use.
const labPrefix = "rljs"

var labRE = regexp.MustCompile(`^` + labPrefix + `(\d+)-\d+-`)

func ipCmd(args ...string) error {
	cmd := exec.Command("ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %v: %w: %s", args, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func newNetLab(n int) (*netLab, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root (euid %d)", ErrNetnsUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNetnsUnavailable, err)
	}
	removeStaleLabs()
	base := fmt.Sprintf("%s%d-%d-", labPrefix, os.Getpid(), labSeq.Add(1))
	l := &netLab{hub: base + "hub"}
	if err := ipCmd("netns", "add", l.hub); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNetnsUnavailable, err)
	}
	steps := [][]string{
		{"-n", l.hub, "link", "set", "lo", "up"},
		{"-n", l.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", l.hub, "link", "set", "br0", "up"},
	}
	for i := range n {
		ns := fmt.Sprintf("%sn%d", base, i+1)
		if err := ipCmd("netns", "add", ns); err != nil {
			return nil, errors.Join(err, l.close())
		}
		l.nodes = append(l.nodes, ns)
		v := fmt.Sprintf("v%d", i+1)
		steps = append(steps,
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", l.hub, "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", l.hub, "link", "set", v, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", l.addr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return nil, errors.Join(err, l.close())
		}
	}
	return l, nil
}

// removeStaleLabs deletes namespaces left by a test process that no longer runs
// (one killed before its cleanup ran).
func removeStaleLabs() {
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		m := labRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = ipCmd("netns", "del", e.Name())
	}
}

func (l *netLab) ns(i int) string   { return l.nodes[i] }
func (l *netLab) addr(i int) string { return fmt.Sprintf("10.201.0.%d", i+1) }

func (l *netLab) setLink(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipCmd("-n", l.hub, "link", "set", fmt.Sprintf("v%d", i+1), state)
}

func (l *netLab) close() error {
	var errs []error
	for _, ns := range append([]string{l.hub}, l.nodes...) {
		if err := ipCmd("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nsDialer dials from inside a network namespace: on a locked thread switched into
// it, so the socket belongs to it (a socket keeps its namespace for life).
type nsDialer struct {
	path    string
	timeout time.Duration
}

func (l *netLab) dialer(i int) *nsDialer {
	return &nsDialer{path: filepath.Join("/var/run/netns", l.nodes[i]), timeout: 2 * time.Second}
}

func (d *nsDialer) Dial(network, address string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := d.dial(network, address)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (d *nsDialer) dial(network, address string) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(d.path)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("jstest: entering %s: %w", d.path, err)
	}
	c, err := net.DialTimeout(network, address, d.timeout)
	if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
		// The thread stays locked and in the wrong namespace: the runtime ends it
		// with this goroutine.
		if c != nil {
			_ = c.Close()
		}
		return nil, fmt.Errorf("jstest: leaving %s: %w", d.path, rerr)
	}
	runtime.UnlockOSThread()
	return c, err
}
