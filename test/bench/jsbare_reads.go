package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// The reads of the bare side's bare+reads and bare+1read (jsbare_batch.go): the
// round trips the engine makes before it sends an append's batch, made with nats.go
// alone on one inbox subscription per worker.

// read makes the reads before an append and returns the head's sequence there. With
// two trips they are the engine's: the stream leader's latest commit marker (Begin's
// position), then the Direct Get at that position, asked again while the replica
// answering has not applied it. With one, only the Direct Get, at the replica's
// latest position, its own commit marker in the answer, which must be at least the
// worker's last commit (asked again until it is): what a transaction that took its
// position from its first read would cost.
func (a *bareAppender) read(ctx context.Context, timeout time.Duration) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var at uint64
	if a.readTrips == 2 {
		resp, err := a.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+a.stream, []byte(`{"last_by_subj":"`+a.commit+`"}`))
		if err != nil {
			return 0, fmt.Errorf("bare read: position: %w", err)
		}
		var got struct {
			Message *struct {
				Seq uint64 `json:"seq"`
			} `json:"message"`
		}
		if err := json.Unmarshal(resp.Data, &got); err != nil {
			return 0, fmt.Errorf("bare read: position %q: %w", resp.Data, err)
		}
		if got.Message == nil {
			return 0, nil // no commit yet: nothing to read
		}
		at = got.Message.Seq
	}
	body, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		UpTo      uint64   `json:"up_to_seq,omitempty"`
	}{[]string{a.catalog(), a.head, a.commit}, at})
	if err != nil {
		return 0, fmt.Errorf("bare read: %w", err)
	}
	for attempt := 0; ; attempt++ {
		head, fence, err := a.directGet(rctx, body)
		if err != nil || (at > 0 && fence == at) || (at == 0 && fence >= a.lastPos) {
			return head, err
		}
		// The replica that answered has not applied the position yet: asked again
		// after the engine's backoff, as the engine's fence does.
		a.fenceWaits.Add(1)
		if err := backoffJS(rctx, attempt); err != nil {
			return 0, fmt.Errorf("bare read: position %d not applied by the replica answering: %w", max(at, a.lastPos), err)
		}
	}
}

// directGet sends one Direct Get request and returns the head's sequence and the
// commit marker's (the fence) in its answer.
func (a *bareAppender) directGet(ctx context.Context, body []byte) (head, fence uint64, err error) {
	if err := a.nc.PublishRequest("$JS.API.DIRECT.GET."+a.stream, a.inbox, body); err != nil {
		return 0, 0, fmt.Errorf("bare read: direct get: %w", err)
	}
	for {
		m, err := a.sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("bare read: direct get: %w", err)
		}
		switch m.Header.Get("Status") {
		case "":
			seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
			switch m.Header.Get("Nats-Subject") {
			case a.head:
				head = seq
			case a.commit:
				fence = seq
			}
		case "204", "404": // the end of the answer; nothing at or below the position
			return head, fence, nil
		case "503":
			return 0, 0, fmt.Errorf("bare read: direct get: %w", nats.ErrNoResponders)
		default:
			return 0, 0, errors.New("bare read: direct get: status " + m.Header.Get("Status") + " " + m.Header.Get("Description"))
		}
	}
}
