package pgstore

import (
	"reflect"
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
