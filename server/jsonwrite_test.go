package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

// sameJSON checks that the hand-written JSON of ours is byte for byte
// what json.Marshal writes for ref, the holdfast value it stands for.
func sameJSON(t *testing.T, ours jsonAppender, ref any) {
	t.Helper()
	got, err := ours.appendJSON([]byte("prefix"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("%T:\n got %s\nwant prefix%s", ours, got, want)
	}
}

// checkWriters writes every answer made of s, locks and the other values
// given, both ways.
func checkWriters(t *testing.T, s string, token uint64, seconds float64, locks []holdfast.Lock, keys []string) {
	t.Helper()
	at := holdfast.Time(time.UnixMilli(int64(token % (1 << 42))).In(time.FixedZone("x", 3600)))
	var lock holdfast.Lock
	if len(locks) > 0 {
		lock = locks[0]
	}
	other := s
	if len(keys) > 0 {
		other = keys[len(keys)-1]
	}

	// acquireResponse is no json.Marshaler: json.Marshal reflects over it.
	for _, acquire := range []acquireResponse{{Locks: locks}, {Locks: locks, Holders: &locks}} {
		sameJSON(t, &acquire, acquire)
	}

	release := holdfast.ReleaseResult{Released: locks, NotHeld: keys}
	sameJSON(t, (*releaseResponse)(&release), release)
	renew := holdfast.RenewResult{Locks: locks}
	sameJSON(t, (*renewResponse)(&renew), renew)
	verify := holdfast.VerifyResult{Lock: lock}
	sameJSON(t, (*verifyResponse)(&verify), verify)
	end := holdfast.EndSessionResult{Released: locks}
	sameJSON(t, (*endSessionResponse)(&end), end)
	for _, next := range []*string{nil, &s} {
		page := holdfast.LockPage{Locks: locks, Next: next}
		sameJSON(t, (*lockPageResponse)(&page), page)
	}

	var lost []holdfast.LostLock
	for i, l := range locks {
		lost = append(lost, holdfast.LostLock{Lock: l, Reason: holdfast.LostReason(s), Actor: []string{s, other}[i%2], ForceReason: other})
	}
	for _, expires := range []*holdfast.Time{nil, &at} {
		hb := holdfast.HeartbeatResult{Session: holdfast.SessionInfo{ID: s, User: s, Name: other, LastSeen: at,
			IdleTimeout: holdfast.Duration(seconds * float64(time.Second)), ExpiresAt: expires, Locks: int(token % 1000)}, Lost: lost}
		sameJSON(t, (*heartbeatResponse)(&hb), hb)
	}

	// apiError and errorBody are no json.Marshalers either.
	for _, err := range []error{
		&holdfast.InvalidError{Field: s, Message: other},
		&holdfast.LockedError{Conflicts: []holdfast.Conflict{{Key: s, RequestedKey: other, Holders: locks}, {Key: other}}},
		&holdfast.LockedError{},
		&holdfast.LockLostError{Reason: holdfast.LostReason(s), Lock: &lock, Actor: other, ForceReason: s, Released: locks, Message: s},
		&holdfast.LockLostError{Reason: holdfast.LostSessionEnded},
		&holdfast.StaleTokenError{Lock: lock, Message: other},
		&holdfast.UnavailableError{},
		errors.New(s),
	} {
		body := errorBody{Error: toAPIError(err)}
		sameJSON(t, &body, body)
	}
	sameJSON(t, &errorBody{}, errorBody{})

	batch := batchResponse{Results: []batchResult{
		{Status: http.StatusOK, Body: (*releaseResponse)(&release)},
		{Status: http.StatusOK, Body: map[string]string{"status": s}},
		{Status: http.StatusConflict, Error: toAPIError(&holdfast.StaleTokenError{Lock: lock})},
	}}
	ref := batchResponse{Results: []batchResult{
		{Status: http.StatusOK, Body: release},
		batch.Results[1], batch.Results[2],
	}}
	sameJSON(t, &batch, ref)
}

func testLocks(s string, token uint64) []holdfast.Lock {
	at := time.Date(2026, 11, 30, 9, 5, 1, 123456789, time.FixedZone("x", 3600))
	return []holdfast.Lock{
		{Key: s, RequestedKey: s, Mode: holdfast.Exclusive, Owner: holdfast.Owner{Session: s}, AcquiredAt: at, ExpiresAt: at.Add(time.Hour), Token: token},
		{Key: "k", Mode: holdfast.Shared, Owner: holdfast.Owner{Session: "s", User: s, Name: s}, Note: s, Token: 1 << 63},
	}
}

func TestJSONWritersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	strs := []string{"", "policy/12345", "Bob Smith", `quote " and \ back`, "<b>&amp;</b>",
		"tab\tnew\nline\x01", "Zoë Ångström 日本", "bad utf8 \xff\xfe", "line\u2028sep", "del\x7f"}
	for i, s := range strs {
		checkWriters(t, s, uint64(i), 0, testLocks(s, uint64(i)), []string{s, "k"})
		checkWriters(t, s, uint64(i)<<40, 0.25, nil, []string{s})
		checkWriters(t, s, 7, 1e-7, []holdfast.Lock{}, []string{})
		checkWriters(t, s, 7, 300, testLocks(s, 9)[:1], nil)
	}
}

func FuzzJSONWriters(f *testing.F) {
	f.Add("policy/1", "Bob", uint64(7), 1.5)
	f.Fuzz(func(t *testing.T, s, note string, token uint64, seconds float64) {
		if seconds < 0 || seconds > 1e9 || seconds != seconds {
			seconds = 1
		}
		locks := testLocks(s, token)
		locks[1].Note = note
		checkWriters(t, s, token, seconds, locks, []string{note, s})
	})
}

// fill sets every exported field of v, however deep, to a value that is
// not empty (strings to s), so that a field added to a request or result
// type, which the hand-written JSON would not know, fails
// TestJSONWritersKnowEveryField and TestJSONReaderKnowsEveryField.
func fill(v reflect.Value, s string) {
	if v.Kind() == reflect.Struct && v.Type().ConvertibleTo(reflect.TypeFor[time.Time]()) {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)).Convert(v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		v.SetInt(7e9)
	case reflect.Uint64:
		v.SetUint(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), s)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	default:
		panic("fill: no value for a " + v.Type().String())
	}
}

func filled[T any](s string) *T {
	v := new(T)
	fill(reflect.ValueOf(v).Elem(), s)
	return v
}

func TestJSONWritersKnowEveryField(t *testing.T) {
	t.Parallel()
	release := filled[holdfast.ReleaseResult]("x<&>")
	sameJSON(t, (*releaseResponse)(release), release)
	renew := filled[holdfast.RenewResult]("x<&>")
	sameJSON(t, (*renewResponse)(renew), renew)
	verify := filled[holdfast.VerifyResult]("x<&>")
	sameJSON(t, (*verifyResponse)(verify), verify)
	heartbeat := filled[holdfast.HeartbeatResult]("x<&>")
	sameJSON(t, (*heartbeatResponse)(heartbeat), heartbeat)
	end := filled[holdfast.EndSessionResult]("x<&>")
	sameJSON(t, (*endSessionResponse)(end), end)
	page := filled[holdfast.LockPage]("x<&>")
	sameJSON(t, (*lockPageResponse)(page), page)
	acquire := filled[acquireResponse]("x<&>")
	sameJSON(t, acquire, acquire)
	body := filled[errorBody]("x<&>")
	sameJSON(t, body, body)
}
