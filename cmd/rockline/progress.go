package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a long command's advance with an ETA on standard error: one bar per
// stage, left complete on its line when the next stage starts. It draws nothing when standard error is not
// a terminal (--progress=auto, the default) or with --progress=never, so piped and
// scripted runs stay quiet; --progress=always draws anyway.
type progress struct {
	w     io.Writer // nil: quiet
	bar   *progressbar.ProgressBar
	stage string
}

// newProgress returns the display the --progress mode asks for.
func (o *options) newProgress() *progress {
	switch o.progress {
	case "always":
		return &progress{w: o.errOut}
	case "auto":
		if f, ok := o.errOut.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return &progress{w: o.errOut}
		}
	}
	return &progress{}
}

// update reports done of total units in stage (total 0: unknown, a spinner); bytes
// says the units are bytes.
func (p *progress) update(stage string, done, total uint64, bytes bool) {
	if p.w == nil {
		return
	}
	if p.bar == nil || stage != p.stage {
		p.finish()
		max := int64(total)
		if total == 0 {
			max = -1
		}
		p.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(fmt.Sprintf("%-8s", stage)),
			progressbar.OptionShowCount(),
			progressbar.OptionShowBytes(bytes),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
		p.stage = stage
	}
	_ = p.bar.Set64(int64(done))
}

// finish ends the current bar, if any.
func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
