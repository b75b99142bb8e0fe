package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/holdfast/holdfast"
)

// printLocks writes locks as an aligned table for people.
func printLocks(w io.Writer, locks []holdfast.Lock) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tMODE\tHOLDER\tSESSION\tSINCE\tEXPIRES\tTOKEN")
	for _, l := range locks {
		key := l.Key
		if l.RequestedKey != "" && l.RequestedKey != l.Key {
			key += " (for " + l.RequestedKey + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", key, l.Mode, holder(l.Owner), l.Owner.Session,
			since(l.AcquiredAt, now), until(l.ExpiresAt, now), l.Token)
	}
	tw.Flush()
}

// holder shows an owner's name and user.
func holder(o holdfast.Owner) string {
	switch {
	case o.Name != "" && o.User != "":
		return o.Name + " (" + o.User + ")"
	case o.Name != "":
		return o.Name
	case o.User != "":
		return o.User
	default:
		return "-"
	}
}

// clock shows a time in UTC, with the date unless it is today.
func clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04 UTC")
	}
	return t.Format("2006-01-02 15:04 UTC")
}

func since(t, now time.Time) string {
	if d := now.Sub(t); d >= 0 {
		return clock(t, now) + " (" + ago(d) + " ago)"
	}
	return clock(t, now)
}

func until(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return clock(t, now) + " (in " + ago(d) + ")"
	}
	return clock(t, now) + " (expired)"
}

// ago shows a duration to a person: coarse, two units at most.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
}

// printJSON writes v indented, for scripts.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// clockNow is clock relative to the present.
func clockNow(t time.Time) string { return clock(t, time.Now()) }
