package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// keyAttr reports whether a tag is worth a place on the tree: rockline's own
// attributes, the error type, and the HTTP method, route and status.
func keyAttr(k string) bool {
	switch k {
	case "error.type", "http.request.method", "http.route", "http.response.status_code":
		return true
	}
	return strings.HasPrefix(k, "rockline.")
}

// Render writes t as an indented tree: one line per span with its duration, its start
// relative to the trace's, its kind when not internal, and its key attributes. Children
// are in start order; spans whose parent is missing are shown as roots.
func Render(w io.Writer, t Trace) error {
	if len(t.Spans) == 0 {
		_, err := fmt.Fprintf(w, "trace %s: no spans\n", t.TraceID)
		return err
	}
	byID := make(map[string]bool, len(t.Spans))
	start := t.Spans[0].StartTime
	for _, s := range t.Spans {
		byID[s.SpanID] = true
		start = min(start, s.StartTime)
	}
	children := map[string][]Span{}
	var roots []Span
	for _, s := range t.Spans {
		if p := s.Parent(); p != "" && byID[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	order := func(a, b Span) int {
		if a.StartTime != b.StartTime {
			return int(a.StartTime - b.StartTime)
		}
		return strings.Compare(a.OperationName, b.OperationName)
	}
	slices.SortFunc(roots, order)
	for _, c := range children {
		slices.SortFunc(c, order)
	}

	var services []string
	for _, p := range t.Processes {
		if !slices.Contains(services, p.ServiceName) {
			services = append(services, p.ServiceName)
		}
	}
	slices.Sort(services)
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s  service %s  %d spans  %s\n", t.TraceID, strings.Join(services, ","), len(t.Spans), ms(t.Duration()))
	var walk func(s Span, prefix, branch string)
	walk = func(s Span, prefix, branch string) {
		fmt.Fprintf(&b, "%s%s%s  %s  +%s%s\n", prefix, branch, s.OperationName, ms(s.Duration), ms(s.StartTime-start), attrs(s))
		switch branch {
		case "├─ ":
			prefix += "│  "
		case "└─ ":
			prefix += "   "
		}
		kids := children[s.SpanID]
		for i, c := range kids {
			if i == len(kids)-1 {
				walk(c, prefix, "└─ ")
			} else {
				walk(c, prefix, "├─ ")
			}
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// attrs returns "  [kind] k=v ..." for the span, or "".
func attrs(s Span) string {
	var out []string
	if k, ok := s.Tag("span.kind").(string); ok && k != "internal" {
		out = append(out, "["+k+"]")
	}
	tags := slices.Clone(s.Tags)
	slices.SortFunc(tags, func(a, b Tag) int { return strings.Compare(a.Key, b.Key) })
	for _, t := range tags {
		if keyAttr(t.Key) {
			out = append(out, fmt.Sprintf("%s=%v", t.Key, t.Value))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "  " + strings.Join(out, " ")
}

// ms formats microseconds as milliseconds.
func ms(us int64) string { return fmt.Sprintf("%.3f ms", float64(us)/1000) }
