package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream engine of the appends scenario: one embedded nats-server node (client
// port on 127.0.0.1, free), file storage in a fresh folder, one stream holding a
// subject per event stream. An append publishes with Nats-Expected-Last-Subject-
// Sequence, the subject's last sequence as the appender last read it (0: none); K > 1
// events are one atomic batch (Nats-Batch-Id/-Sequence/-Commit, the expectation on the
// first message). The stream's version token is the subject's last sequence.
//
// Only the harness links nats-server (an embedded node, as issue 17 asks): the library
// does not (go list -deps ./pipeline shows no nats-io).

// JetStream's error codes the appender tells apart.
const (
	jsWrongLastSequence = 10071 // the expectation failed: nothing stored
	jsSubjectInFlight   = 10164 // another batch on the subject is in flight: re-read
)

type jsAppender struct {
	dir   string
	ns    *server.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	st    jetstream.Stream
	batch atomic.Uint64
}

func openJSAppender(cfg *config, sync bool) (appender, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-bench-js-")
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		SyncAlways: sync, NoSigs: true, NoLog: true, HTTPPort: 0,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ns.Start()
	a := &jsAppender{dir: dir, ns: ns}
	if !ns.ReadyForConnections(30 * time.Second) {
		a.close()
		return nil, errors.New("nats-server: not ready within 30s")
	}
	if a.nc, err = nats.Connect(ns.ClientURL()); err != nil {
		a.close()
		return nil, err
	}
	if a.js, err = jetstream.New(a.nc); err != nil {
		a.close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.st, err = a.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ES", Subjects: []string{"es.>"}, Storage: jetstream.FileStorage,
		AllowAtomicPublish: true, AllowDirect: true,
	})
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

type jsAck struct {
	Seq   uint64 `json:"seq"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

func (a *jsAppender) appendEvents(ctx context.Context, stream string, expected int64, events [][]byte) (int64, bool, error) {
	subject := "es." + stream
	exp := strconv.FormatInt(max(expected, 0), 10)
	var id string
	if len(events) > 1 {
		id = strconv.FormatUint(a.batch.Add(1), 36)
	}
	for i, e := range events {
		m := nats.NewMsg(subject)
		m.Data = e
		if i == 0 {
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", exp)
		}
		if id != "" {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		}
		if i < len(events)-1 {
			if err := a.nc.PublishMsg(m); err != nil {
				return 0, false, err
			}
			continue
		}
		if id != "" {
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := a.nc.RequestMsgWithContext(rctx, m)
		cancel()
		if err != nil {
			return 0, false, err
		}
		var ack jsAck
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, false, fmt.Errorf("publish ack %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			switch ack.Error.ErrCode {
			case jsWrongLastSequence, jsSubjectInFlight:
				return 0, true, nil
			}
			return 0, false, fmt.Errorf("publish: %s (%d)", ack.Error.Description, ack.Error.ErrCode)
		}
		return int64(ack.Seq), false, nil
	}
	return 0, false, errors.New("no events")
}

func (a *jsAppender) head(ctx context.Context, stream string) (int64, error) {
	m, err := a.st.GetLastMsgForSubject(ctx, "es."+stream)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return int64(m.Sequence), nil
}

func (a *jsAppender) events(ctx context.Context, stream string) ([][]byte, error) {
	subject := "es." + stream
	info, err := a.st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, err
	}
	want := int(info.State.Subjects[subject])
	if want == 0 {
		return nil, nil
	}
	cons, err := a.st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, want)
	for len(out) < want {
		batch, err := cons.Fetch(min(want-len(out), 1000), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m.Data())
			n++
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("read back %s: %d of %d messages, then none", subject, len(out), want)
		}
	}
	return out, nil
}

func (a *jsAppender) fsyncs() int64 { return -1 }

func (a *jsAppender) serverCPU() time.Duration { return 0 } // embedded: in cpuTime

func (a *jsAppender) close() error {
	if a.nc != nil {
		a.nc.Close()
	}
	a.ns.Shutdown()
	a.ns.WaitForShutdown()
	return os.RemoveAll(a.dir)
}
