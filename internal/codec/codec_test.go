package codec

import (
	"reflect"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// An entry decoded in place and then owned keeps its values when the
// bytes it was decoded from are reused, as a walk's buffer is for the
// next frame.
func TestOwnAuditCopiesEveryString(t *testing.T) {
	at := time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)
	want := store.AuditEntry{
		ID:    42,
		At:    at,
		Event: "force_released",
		Lock: store.Lock{
			Key: "policy/7", Session: "sess-1", User: "alice", Name: "Alice A.",
			Shared: true, Token: 9, AcquiredAt: at.Add(-time.Hour), ExpiresAt: at.Add(time.Hour),
			Note: "renewal",
		},
		Actor:  "admin",
		Reason: "stuck since Friday",
	}
	b := EncodeAudit(nil, &want)
	var e store.AuditEntry
	if err := DecodeAuditBorrowed(b, &e); err != nil {
		t.Fatal(err)
	}
	OwnAudit(&e)
	for i := range b {
		b[i] = 'x'
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("owned entry after its bytes were reused:\n got %+v\nwant %+v", e, want)
	}
}
