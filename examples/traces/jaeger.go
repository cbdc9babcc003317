package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Response is the envelope of Jaeger's query API (/api/traces and /api/traces/{id}).
type Response struct {
	Data   []Trace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

// Trace is one trace as Jaeger's query API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span; times are in microseconds.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []Tag       `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// Reference links a span to its parent (CHILD_OF) or a cause (FOLLOWS_FROM).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Tag is a span attribute.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the emitting service.
type Process struct {
	ServiceName string `json:"serviceName"`
	Tags        []Tag  `json:"tags"`
}

// Duration returns the trace's span from its first start to its last end, in µs.
func (t Trace) Duration() int64 {
	if len(t.Spans) == 0 {
		return 0
	}
	first, last := t.Spans[0].StartTime, int64(0)
	for _, s := range t.Spans {
		first = min(first, s.StartTime)
		last = max(last, s.StartTime+s.Duration)
	}
	return last - first
}

// Parent returns the span's parent id (its first CHILD_OF reference), or "".
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag returns the value of the tag key, or nil.
func (s Span) Tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// DecodeResponse decodes a query API response; numbers in tags stay exact
// (json.Number).
func DecodeResponse(r io.Reader) (Response, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var resp Response
	err := dec.Decode(&resp)
	return resp, err
}

// Client queries a Jaeger query service.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:16686
	HTTP    *http.Client
}

// Search returns up to limit traces of service from the last lookback (e.g. "1h").
func (c Client) Search(ctx context.Context, service string, limit int, lookback string) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}}
	if lookback != "" {
		q.Set("lookback", lookback)
	}
	return c.get(ctx, "/api/traces?"+q.Encode())
}

// Trace returns one trace by id.
func (c Client) Trace(ctx context.Context, id string) (Trace, error) {
	ts, err := c.get(ctx, "/api/traces/"+url.PathEscape(id))
	if err != nil {
		return Trace{}, err
	}
	if len(ts) != 1 {
		return Trace{}, fmt.Errorf("trace %s: Jaeger returned %d traces", id, len(ts))
	}
	return ts[0], nil
}

// Slowest finds the longest trace of service among the last limit ones and fetches it
// whole by id.
func (c Client) Slowest(ctx context.Context, service string, limit int, lookback string) (Trace, error) {
	ts, err := c.Search(ctx, service, limit, lookback)
	if err != nil {
		return Trace{}, err
	}
	if len(ts) == 0 {
		return Trace{}, fmt.Errorf("no traces of service %q in Jaeger at %s", service, c.BaseURL)
	}
	slowest := ts[0]
	for _, t := range ts[1:] {
		if t.Duration() > slowest.Duration() {
			slowest = t
		}
	}
	return c.Trace(ctx, slowest.TraceID)
}

func (c Client) get(ctx context.Context, path string) ([]Trace, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	r, err := DecodeResponse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("GET %s: status %d, not a Jaeger response: %.200s", path, resp.StatusCode, body)
	}
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, r.Errors[0].Msg)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return r.Data, nil
}
