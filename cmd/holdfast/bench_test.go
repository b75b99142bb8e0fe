package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A short run of every workload through the real binary keeps holdfast
// bench working. It asserts what the table says, never how fast: the
// machine is shared. Peers join when their test addresses are set.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	args := []string{"bench", "--duration", "300ms", "--warmup", "100ms", "--clients", "4",
		"--sessions", "50", "--scale-locks", "3000"}
	peers := map[string]string{"--postgres": "HOLDFAST_TEST_POSTGRES", "--redis": "HOLDFAST_TEST_REDIS", "--etcd": "HOLDFAST_TEST_ETCD"}
	var joined []string
	for flag, env := range peers {
		if v := os.Getenv(env); v != "" {
			args = append(args, flag, strings.TrimPrefix(strings.TrimPrefix(v, "redis://"), "http://"))
			joined = append(joined, flag)
		}
	}
	// holdfast's own server over PostgreSQL joins with the lock table.
	pg := os.Getenv("HOLDFAST_TEST_POSTGRES")
	if pg != "" {
		args = append(args, "--holdfast-postgres", pg)
	}
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("holdfast bench: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^cycle +holdfast +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +holdfast, coalesced into /v1/batch +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +trivial HTTP handler \(ceiling\) +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^hot +holdfast +\d+ +attempts/s .* \d+ granted, \d+ refused, 0 overlaps`),
		regexp.MustCompile(`(?m)^heartbeat +holdfast, one request each +\d+ +sessions/s`),
		regexp.MustCompile(`(?m)^heartbeat +holdfast, 1000 per /v1/batch +\d+ +sessions/s`),
		regexp.MustCompile(`(?m)^aggregate +holdfast +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^scale +holdfast, fill +3000 locks held`),
		regexp.MustCompile(`(?m)^scale +holdfast, restart +ready .* with 3000 locks`),
		regexp.MustCompile(`(?m)^scale +holdfast, sweep +all 3000 expired locks swept`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ trivial HTTP handler \(ceiling\) = \d+\.\d\d×`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the table has no line matching %s:\n%s", want, out)
		}
	}
	rows := map[string]string{"--postgres": "PostgreSQL lock table", "--redis": "Redis SET NX, AOF always", "--etcd": "etcd txn + lease"}
	for _, flag := range joined {
		if !regexp.MustCompile(`(?m)^cycle +` + regexp.QuoteMeta(rows[flag]) + ` +\d+ +cycles/s`).MatchString(out) {
			t.Errorf("%s was given, but the table has no cycle row for %s:\n%s", flag, rows[flag], out)
		}
	}
	if pg != "" {
		for _, system := range []string{"holdfast over PostgreSQL", "holdfast over PostgreSQL, coalesced into /v1/batch"} {
			if !regexp.MustCompile(`(?m)^cycle +` + regexp.QuoteMeta(system) + ` +\d+ +cycles/s`).MatchString(out) {
				t.Errorf("--holdfast-postgres was given, but the table has no cycle row for %s:\n%s", system, out)
			}
		}
	}
	if len(joined) == 0 && !strings.Contains(stderr.String(), "skipping Redis: no --redis address given") {
		t.Errorf("a peer without an address is not reported as skipped:\n%s", &stderr)
	}
	t.Logf("peers joined: %v\n%s", joined, out)
}
