package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/examples/policies/records"
	"github.com/holdfast/holdfast/implicit"
)

// An UPDATE through the decorated repository without the lock is refused
// and leaves the row as it was; the edit page's lock makes the same update
// pass.
func TestUpdateWithoutTheLockIsRefused(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ctx := context.Background()
	reg, err := implicit.NewRegistry(s.locks, testLockTypes())
	if err != nil {
		t.Fatal(err)
	}
	repos, err := records.Open(ctx, s.db, reg)
	if err != nil {
		t.Fatal(err)
	}
	job := implicit.WithOwner(ctx, holdfast.Owner{Session: "nightly-job", User: "batch", Name: "Nightly repricing"})
	p, err := repos.Policies.Find(job, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Premium = "1.00 EUR"
	err = repos.Policies.Update(job, 1, p)
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostNeverHeld {
		t.Fatalf("update without a lock: %v, want lock_lost never_held", err)
	}
	if err := repos.Coverages.Delete(job, 1); !errors.Is(err, holdfast.ErrLockLost) {
		t.Fatalf("delete without a lock: %v", err)
	}
	if err := repos.Policies.Update(ctx, 1, p); !errors.Is(err, implicit.ErrNoOwner) {
		t.Fatalf("update without an owner: %v", err)
	}
	var premium string
	if err := s.db.QueryRow(`SELECT premium FROM policies WHERE id = 1`).Scan(&premium); err != nil || premium != "1,240.00 EUR" {
		t.Fatalf("premium = %q, %v: a refused update changed the row", premium, err)
	}

	// A colleague's lock refuses the job too, naming her.
	ada := implicit.WithOwner(ctx, holdfast.Owner{Session: "ada-page", User: "ada", Name: "Ada Lovelace"})
	if _, _, err := repos.Policies.Edit(ada, 1, implicit.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := repos.Policies.Edit(job, 1, implicit.EditOptions{}); err == nil || !strings.Contains(err.Error(), "Ada Lovelace") {
		t.Fatalf("edit while Ada holds it: %v", err)
	}
	if err := repos.Policies.Update(ada, 1, p); err != nil {
		t.Fatalf("Ada's update under her lock: %v", err)
	}
}

// A save posted without an edit page, or with a forged page token, never
// reaches the repository.
func TestSaveNeedsTheEditPage(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	jar := signInHTTP(t, s, "ben")
	for name, form := range map[string]url.Values{
		"no page":      {"premium": {"1.00 EUR"}},
		"forged token": {"premium": {"1.00 EUR"}, "holdfast_page": {"abc"}, "holdfast_token": {"forged"}},
	} {
		req, _ := http.NewRequest("POST", s.url+"/policies/1/save", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := jar.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want refused", name, res.Status)
		}
	}
	var premium string
	if err := s.db.QueryRow(`SELECT premium FROM policies WHERE id = 1`).Scan(&premium); err != nil || premium != "1,240.00 EUR" {
		t.Fatalf("premium = %q, %v", premium, err)
	}
}

// signInHTTP returns an HTTP client signed in as person, with a cookie jar.
func signInHTTP(t *testing.T, s *site, person string) *http.Client {
	t.Helper()
	c := &http.Client{Jar: newJar(t)}
	res, err := c.PostForm(s.url+"/signin", url.Values{"person": {person}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Request.URL.Path != "/policies" {
		t.Fatalf("sign-in ended at %s", res.Request.URL)
	}
	return c
}

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

// Times on pages carry their date only when it is not today's, in UTC.
func TestClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 22, 52, 0, 0, time.UTC)
	for at, want := range map[time.Time]string{
		now.Add(-3 * time.Hour):                  "19:52 UTC",
		now.Add(2 * time.Hour):                   "Dec 1, 00:52 UTC",
		now.Add(-24 * time.Hour):                 "Nov 29, 22:52 UTC",
		now.In(time.FixedZone("CET", 3600)):      "22:52 UTC",
		now.AddDate(1, 0, 0).Add(-2 * time.Hour): "Nov 30, 20:52 UTC",
	} {
		if got := clock(at, now); got != want {
			t.Errorf("clock(%v, %v) = %q, want %q", at, now, got, want)
		}
	}
}
