package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/jetstream"
)

// cutAfterCommit is a dialer whose connection closes itself right after writing a
// commit message (the one carrying Nats-Batch-Commit), once it is armed: the commit has
// reached the server, its acknowledgement never comes back.
type cutAfterCommit struct{ armed atomic.Bool }

func (d *cutAfterCommit) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &cuttingConn{Conn: c, d: d}, nil
}

type cuttingConn struct {
	net.Conn
	d *cutAfterCommit
}

func (c *cuttingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && bytes.Contains(b, []byte("Nats-Batch-Commit")) && c.d.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
	}
	return n, err
}

// TestConnectionLostAfterCommitSent: a connection lost once the commit message went
// out (no reconnect) leaves the outcome open: Commit must say so with a typed error
// (ErrOutcomeUnknown, its resolution unable to reach the server) rather than an
// untyped transport error that reads as "not written", and the commit did land.
func TestConnectionLostAfterCommitSent(t *testing.T) {
	ctx := ctxT(t)
	_, cfg := open(t, 3)
	d := &cutAfterCommit{}
	nc, err := cluster.Connect(0, nats.SetCustomDialer(d), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg.PublishTimeout, cfg.ResolveTimeout = 5*time.Second, 2*time.Second
	p := openOn(t, nc, cfg)
	d.armed.Store(true)
	_, err = p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v"), Blind: true}}})
	if !errors.Is(err, jetstream.ErrOutcomeUnknown) {
		t.Fatalf("Commit over a connection lost after sending: %v, want ErrOutcomeUnknown", err)
	}
	// The commit landed: another connection reads it.
	other := openOn(t, connect(t, 1), cfg)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		pos, err := other.Position(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := other.Get(rctx, "f", []byte("k"), pos); err != nil || ok {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if rctx.Err() != nil {
			t.Fatal("the commit whose acknowledgement was lost is not in the partition")
		}
	}
}
