package bench

import (
	"fmt"
	"io"
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
	unit string
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

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\tthroughput\t\tp50\tp99\tserver CPU/op\tCPUs busy\tnotes\t")
	for _, r := range rows {
		if r.note != "" && r.ops == 0 {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t%s\t\n", r.workload, r.name(), r.note)
			continue
		}
		cpu, busy := "-", "-"
		if r.cpuKnown {
			cpu = fmtDuration(r.cpuPerOp)
		}
		if r.busyKnown {
			busy = fmt.Sprintf("%.2f of %d", r.busyCPUs, numCPU())
		}
		note := r.note
		if r.workload == "hot" && r.system.locks() {
			note = fmt.Sprintf("%d granted, %d refused, %d overlaps", r.granted, r.refused, r.violations)
		}
		unit := units[r.workload]
		if r.unit != "" {
			unit = r.unit
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.workload, r.name(), r.rate(), unit,
			fmtDuration(r.p50), fmtDuration(r.p99), cpu, busy, note)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nRatios (throughput of holdfast ÷ throughput of the other system, same run):")
	for _, h := range rows {
		if !h.system.holdfast || h.ops == 0 {
			continue
		}
		for _, p := range rows {
			if p.workload != h.workload || p.system.holdfast || p.system.probe || p.ops == 0 {
				continue
			}
			if h.mode != "" && p.mode != "" && h.mode != p.mode {
				continue // one request each against batches compares nothing
			}
			fmt.Fprintf(w, "  %-9s %s ÷ %s = %.2f×\n", h.workload, h.name(), p.name(), h.rate()/p.rate())
		}
	}
}

// printLatency sets a single client's acquire latency on each of
// holdfast's cycle rows beside the least it could be: one durable commit
// of the disk (the probe's p50) plus one round trip of the ceiling (its
// acquire's p50). Under more clients the latency is mostly waiting for a
// turn, so Run prints this for one client only.
func printLatency(w io.Writer, rows []row) {
	var disk, ceiling *row
	for i := range rows {
		switch r := &rows[i]; {
		case r.workload != "cycle" || r.ops == 0:
		case r.system.probe:
			disk = r
		case r.system.ceiling:
			ceiling = r
		}
	}
	if disk == nil || ceiling == nil {
		return
	}
	floor := disk.p50 + ceiling.p50
	fmt.Fprintf(w, "\nLatency at one client (acquire p50 ÷ (the disk's sync p50 %s + the ceiling's acquire p50 %s), same run):\n",
		fmtDuration(disk.p50), fmtDuration(ceiling.p50))
	for _, r := range rows {
		if r.workload == "cycle" && r.system.holdfast && r.ops > 0 {
			fmt.Fprintf(w, "  %-9s %s = %.2f×\n", r.workload, r.name(), float64(r.p50)/float64(floor))
		}
	}
}

// locks reports whether the system really locks (the trivial handler
// grants everything).
func (s *system) locks() bool { return !s.ceiling }

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
