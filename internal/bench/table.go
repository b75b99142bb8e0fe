package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one system's figures for one workload.
type row struct {
	workload string
	system   *system
	mode     string // how the workload drove the system, when it varies
	ops      int64  // completed operations (unit per workload)
	elapsed  time.Duration
	p50, p99 time.Duration
	cpuPerOp time.Duration
	cpuKnown bool
	// busyCPUs is how many of the machine's CPUs were busy on average,
	// with anything (clients, servers, everything else).
	busyCPUs  float64
	busyKnown bool
	// hot only
	granted, refused, violations int64
	// note is extra text (the scale workload's figures).
	note string
	// unit replaces the workload's unit of throughput (the disk probe's).
	unit  string
	round int // of Config.Rounds, from 0
}

func (r row) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// units names what one operation of each workload is.
var units = map[string]string{
	"cycle":     "cycles/s",
	"hot":       "attempts/s",
	"heartbeat": "sessions/s",
	"aggregate": "cycles/s",
}

func (r row) name() string {
	if r.mode != "" {
		return r.system.name + ", " + r.mode
	}
	return r.system.name
}

// series is one system's rows of one workload, a row a round, in the
// order the rounds ran.
type series []row

// seriesOf groups rows by workload and system, in the order each first
// appears.
func seriesOf(rows []row) []series {
	var out []series
	at := make(map[string]int)
	for _, r := range rows {
		id := r.workload + "\x00" + r.name()
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// shown is the row the table shows for s: its only one, or the measured
// one of median throughput, so that its latencies and CPU are one round's
// as measured. Of an even count (a round failed) it is the lower of the
// middle two, as for the ratios (median).
func (s series) shown() row {
	var measured []row
	for _, r := range s {
		if r.ops > 0 {
			measured = append(measured, r)
		}
	}
	if len(measured) == 0 {
		return s[0]
	}
	slices.SortFunc(measured, func(a, b row) int { return cmp.Compare(a.rate(), b.rate()) })
	return measured[(len(measured)-1)/2]
}

// spread says, for a run of more than one round, of how many rounds the
// row shown is the median and the least and most throughput among them.
func (s series) spread(rounds int) string {
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, r := range s {
		if r.ops > 0 {
			lo, hi, n = min(lo, r.rate()), max(hi, r.rate()), n+1
		}
	}
	switch {
	case rounds < 2 || n == 0:
		return ""
	case n < rounds:
		return fmt.Sprintf("median of %d of %d rounds, %.0f–%.0f", n, rounds, lo, hi)
	}
	return fmt.Sprintf("median of %d rounds, %.0f–%.0f", n, lo, hi)
}

// failures lists why s's rows failed, each with its round when the run
// had more than one.
func (s series) failures(rounds int) []string {
	var out []string
	for _, r := range s {
		switch {
		case r.ops > 0 || r.note == "":
		case rounds > 1:
			out = append(out, fmt.Sprintf("round %d %s", r.round+1, r.note))
		default:
			out = append(out, r.note)
		}
	}
	return out
}

// roundsOf is how many rounds rows come from.
func roundsOf(rows []row) int {
	n := 0
	for _, r := range rows {
		n = max(n, r.round+1)
	}
	return n
}

// perRound is f of s's row of each of the run's rounds, NaN where s did
// not measure that round or f has nothing for it.
func (s series) perRound(rounds int, f func(row) (float64, bool)) []float64 {
	out := make([]float64, rounds)
	for i := range out {
		out[i] = math.NaN()
	}
	for _, r := range s {
		if x, ok := f(r); ok && r.ops > 0 {
			out[r.round] = x
		}
	}
	return out
}

// ratios divides h's throughput by p's in each of the run's rounds, NaN
// where either was not measured.
func ratios(h, p series, rounds int) []float64 {
	of := p.perRound(rounds, func(r row) (float64, bool) { return r.rate(), true })
	return h.perRound(rounds, func(r row) (float64, bool) {
		return r.rate() / of[r.round], !math.IsNaN(of[r.round])
	})
}

// fmtRatios prints the median of xs and, when there are more, each in
// its round's place, "–" where there is none.
func fmtRatios(xs []float64) string {
	out := fmt.Sprintf("%.2f×", median(xs))
	if len(xs) > 1 {
		each := make([]string, len(xs))
		for i, x := range xs {
			each[i] = "–"
			if !math.IsNaN(x) {
				each[i] = fmt.Sprintf("%.2f×", x)
			}
		}
		out += " (rounds: " + strings.Join(each, ", ") + ")"
	}
	return out
}

// median is the median of xs other than NaN, the lower of the middle two
// of an even count; NaN when there is none.
func median(xs []float64) float64 {
	var s []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// measured reports whether xs holds a ratio of at least one round.
func measured(xs []float64) bool {
	return slices.ContainsFunc(xs, func(x float64) bool { return !math.IsNaN(x) })
}

func printTable(w io.Writer, rows []row) {
	all, rounds := seriesOf(rows), roundsOf(rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\tthroughput\t\tp50\tp99\tserver CPU/op\tCPUs busy\tnotes\t")
	for _, s := range all {
		r := s.shown()
		// Run's error says the table tells why a row failed.
		failures := s.failures(rounds)
		if r.ops == 0 && len(failures) > 0 {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t%s\t\n", r.workload, r.name(), strings.Join(failures, "; "))
			continue
		}
		cpu, busy := "-", "-"
		if r.cpuKnown {
			cpu = fmtDuration(r.cpuPerOp)
		}
		if r.busyKnown {
			busy = fmt.Sprintf("%.2f of %d", r.busyCPUs, numCPU())
		}
		var notes []string
		if spread := s.spread(rounds); spread != "" {
			notes = append(notes, spread)
		}
		notes = append(notes, failures...)
		if r.workload == "hot" && r.system.locks() {
			notes = append(notes, fmt.Sprintf("%d granted, %d refused, %d overlaps", r.granted, r.refused, r.violations))
		} else if r.note != "" {
			notes = append(notes, r.note)
		}
		unit := units[r.workload]
		if r.unit != "" {
			unit = r.unit
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.workload, r.name(), r.rate(), unit,
			fmtDuration(r.p50), fmtDuration(r.p99), cpu, busy, strings.Join(notes, "; "))
	}
	tw.Flush()

	var lines []string
	for _, h := range all {
		hr := h[0]
		if !hr.system.holdfast {
			continue
		}
		for _, p := range all {
			pr := p[0]
			if pr.workload != hr.workload || pr.system.holdfast || pr.system.probe {
				continue
			}
			if hr.mode != "" && pr.mode != "" && hr.mode != pr.mode {
				continue // one request each against batches compares nothing
			}
			if xs := ratios(h, p, rounds); measured(xs) {
				lines = append(lines, fmt.Sprintf("  %-9s %s ÷ %s = %s\n", hr.workload, hr.name(), pr.name(), fmtRatios(xs)))
			}
		}
	}
	if len(lines) == 0 {
		return // no peer and no ceiling: no heading over nothing
	}
	fmt.Fprintln(w, "\nRatios (throughput of holdfast ÷ throughput of the other system, same run):")
	if rounds > 1 {
		fmt.Fprintln(w, "(each the median of the rounds' own ratios, every round's in brackets)")
	}
	for _, l := range lines {
		fmt.Fprint(w, l)
	}
}

// printLatency sets a single client's acquire latency on each of
// holdfast's cycle rows beside the least it could be: one durable commit
// of the disk (the probe's p50) plus one round trip of the ceiling (its
// acquire's p50), both of the same round. Under more clients the latency
// is mostly waiting for a turn, so Run prints this for one client only.
func printLatency(w io.Writer, rows []row) {
	rounds := roundsOf(rows)
	floors := make([]time.Duration, rounds) // by round; 0 where unknown
	var disk, ceiling row
	for _, d := range rows {
		if d.workload != "cycle" || d.ops == 0 || !d.system.probe {
			continue
		}
		for _, c := range rows {
			if c.workload == "cycle" && c.ops > 0 && c.system.ceiling && c.round == d.round {
				floors[d.round] = d.p50 + c.p50
				disk, ceiling = d, c
			}
		}
	}
	if !slices.ContainsFunc(floors, func(f time.Duration) bool { return f > 0 }) {
		return
	}
	if rounds == 1 {
		fmt.Fprintf(w, "\nLatency at one client (acquire p50 ÷ (the disk's sync p50 %s + the ceiling's acquire p50 %s), same run):\n",
			fmtDuration(disk.p50), fmtDuration(ceiling.p50))
	} else {
		fmt.Fprintln(w, "\nLatency at one client (acquire p50 ÷ (the disk's sync p50 + the ceiling's acquire p50), each of the same round;")
		fmt.Fprintln(w, "the median of the rounds, every round's in brackets):")
	}
	for _, s := range seriesOf(rows) {
		if r := s[0]; r.workload != "cycle" || !r.system.holdfast {
			continue
		}
		xs := s.perRound(rounds, func(r row) (float64, bool) {
			return float64(r.p50) / float64(floors[r.round]), floors[r.round] > 0
		})
		if measured(xs) {
			fmt.Fprintf(w, "  %-9s %s = %s\n", s[0].workload, s[0].name(), fmtRatios(xs))
		}
	}
}

// locks reports whether the system really locks (the trivial handlers
// grant everything).
func (s *system) locks() bool { return !s.trivial }

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
}
