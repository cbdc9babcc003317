package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// logCmd prints log entries decoded, optionally only events that match filters, and
// with --follow keeps printing new ones.
func logCmd(o *options) *cobra.Command {
	var from uint64
	var last, limit int
	var follow bool
	var poll time.Duration
	var streamRe, typeRe string
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Log entries decoded: events with stream and revision, writes with family and key",
		Long: `log prints log entries from --from (or the last --last positions), at most --limit of
them. --stream and --type (regular expressions over the stream name and the event type)
keep only the entries holding a matching event and print only those events. --follow
then keeps printing new entries as the writer commits them (catching up every --poll)
until interrupted; with --json it prints one JSON object per line.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit, 1<<20); err != nil {
				return err
			}
			if last < 0 {
				return usageError{fmt.Errorf("--last %d: expected a count of entries, not negative", last)}
			}
			if follow && poll <= 0 {
				return usageError{fmt.Errorf("--poll %v: expected a positive interval", poll)}
			}
			var filter *eventstore.Filter
			for flag, expr := range map[string]string{"stream": streamRe, "type": typeRe} {
				if expr == "" {
					continue
				}
				re, err := regexp.Compile(expr)
				if err != nil {
					return usageError{fmt.Errorf("--%s %q: expected a regular expression: %w", flag, expr, err)}
				}
				if filter == nil {
					filter = &eventstore.Filter{}
				}
				if flag == "stream" {
					filter.StreamRegexp = re
				} else {
					filter.TypeRegexp = re
				}
			}
			ctx := cmd.Context()
			if follow { // an interrupt ends the follow with exit status 0
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
				defer stop()
			}
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			if last > 0 {
				if top := db.LastPosition(); top > uint64(last) {
					from = max(from, top-uint64(last)+1)
				}
			}
			from = max(from, db.FirstPosition())
			p := entryPrinter{o: o, filter: filter, lines: follow}
			it := db.LogIterator(from)
			at := from - 1
			for p.printed < limit && it.Next() {
				e := it.Entry()
				at = e.Position
				if err := p.print(e); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				p.flush()
				return err // a corrupt entry ends the read after the intact ones
			}
			if !follow {
				return p.flush()
			}
			return followLog(ctx, db, at, poll, p.print)
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 1, "first position")
	cmd.Flags().IntVar(&last, "last", 0, "the last N positions instead")
	cmd.Flags().IntVar(&limit, "limit", 100, "entries at most (before --follow)")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new entries until interrupted")
	cmd.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "with --follow, how often to catch up with the writer")
	cmd.Flags().StringVar(&streamRe, "stream", "", "only events of streams matching this regular expression")
	cmd.Flags().StringVar(&typeRe, "type", "", "only events of types matching this regular expression")
	return cmd
}

// followLog prints every entry after at as the secondary catches up, until ctx ends
// (an interrupt: exit status 0) or the subscription fails.
func followLog(ctx context.Context, db *pipeline.DB, at uint64, poll time.Duration, print func(pipeline.LogEntry) error) error {
	// The subscription's goroutine is the only caller of print from here on; it ends
	// when ctx does (Close waits for it).
	sub, err := db.Subscribe(ctx, at, print)
	if err != nil {
		return err
	}
	defer sub.Close()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			if err := sub.Wait(); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-tick.C:
			if err := db.CatchUp(); err != nil {
				return fmt.Errorf("catch up: %w", err)
			}
		}
	}
}

// entryPrinter prints log entries as text, a JSON array (collected until flush) or
// JSON lines (lines: for --follow), keeping only matching events when filter is set.
type entryPrinter struct {
	o       *options
	filter  *eventstore.Filter
	lines   bool
	printed int
	all     []pipeline.LogEntry
}

func (p *entryPrinter) print(e pipeline.LogEntry) error {
	if p.filter != nil {
		var keep []pipeline.RecordedEvent
		for i := range e.Events {
			if p.filter.Match(&e.Events[i]) {
				keep = append(keep, e.Events[i])
			}
		}
		if len(keep) == 0 {
			return nil
		}
		e.Events, e.Writes, e.Families = keep, nil, nil
	}
	p.printed++
	switch {
	case p.o.json && p.lines:
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.o.out, "%s\n", b)
		return err
	case p.o.json:
		p.all = append(p.all, e)
		return nil
	}
	return printEntry(p.o, e)
}

// flush prints what the JSON array form collected.
func (p *entryPrinter) flush() error {
	if p.o.json && !p.lines {
		if p.all == nil {
			p.all = []pipeline.LogEntry{}
		}
		return p.o.emitJSON(p.all)
	}
	return nil
}

// printEntry prints one entry as text.
func printEntry(o *options, e pipeline.LogEntry) error {
	kind := ""
	if e.Filler {
		kind = " filler"
	}
	if _, err := fmt.Fprintf(o.out, "%d  %s%s  %d events, %d writes\n", e.Position, e.Time.UTC().Format(time.RFC3339Nano), kind, len(e.Events), len(e.Writes)); err != nil {
		return err
	}
	for _, ev := range e.Events {
		stream := "(no stream)"
		if ev.Stream != "" {
			stream = fmt.Sprintf("%s@%d", ev.Stream, ev.Revision)
		}
		tags := ""
		if len(ev.Tags) > 0 {
			tags = fmt.Sprintf(" tags=%q", ev.Tags)
		}
		fmt.Fprintf(o.out, "    event %s %s id=%q%s %d bytes\n", stream, ev.Type, ev.ID, tags, len(ev.Data))
	}
	for _, w := range e.Writes {
		op := "put"
		switch {
		case w.Range:
			op = "delete range to " + printable(w.Value)
		case w.Delete:
			op = "delete"
		}
		fmt.Fprintf(o.out, "    %s/%d %s %s\n", w.Family, w.Generation, printable(w.Key), op)
	}
	for _, f := range e.Families {
		what := "create"
		if f.Dropped {
			what = "drop"
		}
		fmt.Fprintf(o.out, "    family %s %s/%d\n", what, f.Family, f.Generation)
	}
	return nil
}
