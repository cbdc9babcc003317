package bankapp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadOptions shape RunLoad.
type LoadOptions struct {
	Duration       time.Duration
	Accounts       int   // accounts opened (or reused) before the load; default 50
	OpeningBalance int64 // default 1000
	Workers        int   // concurrent clients; default 16
	MaxRequests    int   // stop after this many transfers even before Duration; default 1,000,000
}

// LoadReport is what a load did.
type LoadReport struct {
	Transfers, OK, Insufficient, Conflicts, Failed int   // Conflicts: 409s (retries exhausted)
	Retried                                        int64 // Update attempts beyond the first
	P50, P99                                       time.Duration
	TotalBefore, TotalAfter                        int64
	Elapsed                                        time.Duration
}

// Conserved reports whether the money in the bank is what it was.
func (r LoadReport) Conserved() bool { return r.TotalBefore == r.TotalAfter }

func (r LoadReport) String() string {
	return fmt.Sprintf("transfers: %d in %s (%d ok, %d insufficient funds (422), %d conflicts after retries (409), %d failed)\n"+
		"conflicts retried: %d\nlatency: p50 %s, p99 %s\ntotal money: before %d, after %d, conserved %t\n",
		r.Transfers, r.Elapsed.Round(time.Millisecond), r.OK, r.Insufficient, r.Conflicts, r.Failed,
		r.Retried, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.TotalBefore, r.TotalAfter, r.Conserved())
}

// RunLoad opens accounts over HTTP at baseURL (a loopback server of this process), runs
// random concurrent transfers between them until o.Duration or o.MaxRequests, and
// reports. b is the same Bank the server uses: its counters give the retries and its
// Total the money before and after.
func RunLoad(ctx context.Context, baseURL string, b *Bank, o LoadOptions) (LoadReport, error) {
	o = o.withDefaults()
	if o.Accounts < 2 {
		return LoadReport{}, fmt.Errorf("load needs at least 2 accounts, not %d", o.Accounts)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.Workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ids := make([]string, o.Accounts)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%03d", i)
		st, err := post(ctx, client, baseURL+"/accounts", Account{ID: ids[i], Balance: o.OpeningBalance})
		if err != nil {
			return LoadReport{}, err
		}
		if st != http.StatusCreated && st != http.StatusConflict {
			return LoadReport{}, fmt.Errorf("open %s: status %d", ids[i], st)
		}
	}
	var rep LoadReport
	var err error
	if _, rep.TotalBefore, err = b.Total(); err != nil {
		return rep, err
	}
	before := b.Stats()
	// Requests are never cut: each worker stops starting new ones at the deadline.
	start := time.Now()
	deadline := start.Add(o.Duration)
	var issued atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			var mine []time.Duration
			var ok, insuf, confl, failed int
			for ctx.Err() == nil && time.Now().Before(deadline) && issued.Add(1) <= int64(o.MaxRequests) {
				from, to := rand.N(len(ids)), rand.N(len(ids)-1)
				if to >= from {
					to++
				}
				t0 := time.Now()
				st, err := post(ctx, client, baseURL+"/transfers", TransferRequest{From: ids[from], To: ids[to], Amount: 1 + rand.Int64N(200)})
				mine = append(mine, time.Since(t0))
				switch {
				case err != nil:
					failed++
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				case st == http.StatusOK:
					ok++
				case st == http.StatusUnprocessableEntity:
					insuf++
				case st == http.StatusConflict:
					confl++
				default:
					failed++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			rep.OK, rep.Insufficient, rep.Conflicts, rep.Failed = rep.OK+ok, rep.Insufficient+insuf, rep.Conflicts+confl, rep.Failed+failed
			mu.Unlock()
		})
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.Transfers = len(lat)
	after := b.Stats()
	rep.Retried = (after.Attempts - before.Attempts) - (after.Transfers - before.Transfers)
	rep.P50, rep.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if _, rep.TotalAfter, err = b.Total(); err != nil {
		return rep, err
	}
	return rep, firstErr
}

func (o LoadOptions) withDefaults() LoadOptions {
	if o.Accounts == 0 {
		o.Accounts = 50
	}
	if o.OpeningBalance == 0 {
		o.OpeningBalance = 1000
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = 1_000_000
	}
	return o
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

func post(ctx context.Context, c *http.Client, url string, body any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}
