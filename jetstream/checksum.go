package jetstream

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/pipeline"
)

// Every message a commit writes for a key or an event carries a checksum of what a
// reader takes from it (hdrSum): CRC-32C over its subject, the engine's headers that
// give it meaning (op, revision, event ID, positioned encoding and distance) and its
// data. JetStream replicates and stores messages without checking their content: a
// replica whose files were corrupted (a bit flip on a minority's disk) serves the
// corrupted message as it is. Readers verify the checksum on every key and event
// message they decode (Direct Get answers and subscriptions alike), so such a message
// is a *CorruptMessageError, never wrong data. A key or event message without a
// checksum is corrupt too: the engine writes none.

const hdrSum = "Rl-Sum"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// summedHeaders are the headers the checksum covers, in this order.
var summedHeaders = [...]string{hdrOp, hdrRev, hdrMsgID, hdrEnc, hdrAt}

// messageSum is the checksum of a message with subject, header h and data, as the
// hex of its CRC-32C (8 bytes).
func messageSum(subject string, h nats.Header, data []byte) string {
	c := crc32.Update(0, castagnoli, []byte(subject))
	for _, k := range summedHeaders {
		c = crc32.Update(c, castagnoli, []byte{0})
		c = crc32.Update(c, castagnoli, []byte(h.Get(k)))
	}
	c = crc32.Update(c, castagnoli, []byte{0})
	c = crc32.Update(c, castagnoli, data)
	var b [4]byte
	b[0], b[1], b[2], b[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return hex.EncodeToString(b[:])
}

// sum sets m's checksum header; m must hold every other header it will carry.
func sum(m *nats.Msg) { m.Header.Set(hdrSum, messageSum(m.Subject, m.Header, m.Data)) }

// summed reports whether messages on subject carry a checksum: keys and events.
func (s subjects) summed(subject string) bool {
	rest, ok := strings.CutPrefix(subject, s.prefix)
	return ok && (strings.HasPrefix(rest, tokKey+".") || strings.HasPrefix(rest, tokEvent+"."))
}

// verify checks the checksum of a stored message (seq, subject, h, data) when its
// subject carries one.
func (p *Partition) verify(seq uint64, subject string, h nats.Header, data []byte) error {
	if !p.subj.summed(subject) {
		return nil
	}
	got := h.Get(hdrSum)
	if got == "" {
		return &CorruptMessageError{Sequence: seq, Subject: subject, Reason: "no checksum"}
	}
	if want := messageSum(subject, h, data); got != want {
		return &CorruptMessageError{Sequence: seq, Subject: subject, Reason: fmt.Sprintf("checksum %s, content sums to %s", got, want)}
	}
	return nil
}

// CorruptMessageError reports a stored message whose content does not match the
// checksum its commit gave it (or that lacks one): the replica that served it holds
// a corrupted copy. It matches pipeline.ErrCorrupt. Reading again may reach a replica
// with a sound copy.
type CorruptMessageError struct {
	Sequence uint64
	Subject  string
	Reason   string
}

// Error names the message and what is wrong with it.
func (e *CorruptMessageError) Error() string {
	return fmt.Sprintf("rockline/jetstream: the message at sequence %d (%s) is corrupt: %s", e.Sequence, e.Subject, e.Reason)
}

// Is reports whether target is pipeline.ErrCorrupt.
func (e *CorruptMessageError) Is(target error) bool { return target == pipeline.ErrCorrupt }
