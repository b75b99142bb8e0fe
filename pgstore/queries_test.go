package pgstore

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every statement of the read transactions is marked, so that no plan a
// read makes serves a write (forReads lists the statements by hand), and
// so are the listings they build.
func TestReadStatementsAreMarked(t *testing.T) {
	q := newQueries("s").forReads()
	v := reflect.ValueOf(q)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String || f.Name == "schema" || f.Name == "mark" {
			continue
		}
		if stmt := v.Field(i).String(); !strings.HasPrefix(stmt, readMark) {
			t.Errorf("queries.%s is not marked as a read's: %.60s", f.Name, stmt)
		}
	}
	if q.mark != readMark {
		t.Errorf("the reads' listings are marked %q", q.mark)
	}
}

// unknownAggregates names each unknown key or ancestor once, however many
// keys share it, and leaves out those whose mappings are known.
func TestUnknownAggregatesAreListedOnce(t *testing.T) {
	root := "policy/1"
	tx := &tx{aggs: map[string]*string{"claim/7": &root, "claim": nil}}
	got := tx.unknownAggregates([]string{"order/2/line/1", "order/1", "order/2/line/1", "claim/7/note", "order/2"})
	want := []string{"claim/7/note", "order", "order/1", "order/2", "order/2/line", "order/2/line/1"}
	if !slices.Equal(got, want) {
		t.Errorf("unknownAggregates = %q, want %q", got, want)
	}
}
