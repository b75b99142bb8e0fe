package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// servedProcess is the real holdfast binary running "serve".
type servedProcess struct {
	cmd  *exec.Cmd
	url  string
	logs chan map[string]any // every JSON log line, after the address
	done chan error
}

const (
	serveClientToken = "client-tok"
	serveAdminToken  = "admin-tok"
	// serveWait bounds waits that would otherwise hang a broken test.
	serveWait = 30 * time.Second
)

// runServe starts holdfast serve on a free loopback port over dir and
// returns once it has logged the address it listens on.
func runServe(t *testing.T, dir string, flags ...string) *servedProcess {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--store", dir, "--log-format", "json", "--shutdown-timeout", "20s"}, flags...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "HOLDFAST_CONFIG=", "HOLDFAST_LISTEN=", "HOLDFAST_STORE=",
		"HOLDFAST_TOKENS=client:"+serveClientToken+",admin:"+serveAdminToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &servedProcess{cmd: cmd, logs: make(chan map[string]any, 1000), done: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				rec = map[string]any{"msg": sc.Text()}
			}
			if rec["msg"] == "listening" {
				addr <- rec["addr"].(string)
			}
			select {
			case p.logs <- rec:
			default:
			}
		}
		io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		p.done <- err
		t.Fatalf("holdfast serve exited before listening: %v", err)
	case <-time.After(serveWait):
		t.Fatal("holdfast serve did not log its address")
	}
	return p
}

func (p *servedProcess) post(t *testing.T, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return res.StatusCode, out
}

// stop sends SIGTERM and returns the exit error.
func (p *servedProcess) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(serveWait):
		t.Fatal("holdfast serve did not exit after SIGTERM")
		return nil
	}
}

// The profiler answers on its own listener and not on the API's.
func TestServeDebugListen(t *testing.T) {
	t.Parallel()
	p := runServe(t, t.TempDir(), "--debug-listen", "127.0.0.1:0")
	var debugURL string
	for debugURL == "" {
		select {
		case rec := <-p.logs:
			if rec["msg"] == "profiler listening" {
				debugURL = rec["url"].(string)
			}
		case <-time.After(serveWait):
			t.Fatal("no profiler address logged")
		}
	}
	res, err := http.Get(debugURL + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("profiler: %d %.200s", res.StatusCode, body)
	}
	res, err = http.Get(p.url + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == 200 {
		t.Fatal("the API's listener serves the profiler")
	}
}

func TestServeBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := runServe(t, dir)

	const bob = `{"keys": ["policy/12345"], "owner": {"session": "s-81", "name": "Bob Smith"}}`
	const alice = `{"keys": ["policy/12345"], "owner": {"session": "s-99", "name": "Alice"}}`
	if status, _ := p.post(t, "/v1/locks/acquire", "", bob); status != 401 {
		t.Fatalf("acquire without a token: %d, want 401", status)
	}
	status, got := p.post(t, "/v1/locks/acquire", serveClientToken, bob)
	if status != 200 {
		t.Fatalf("acquire: %d %v", status, got)
	}
	status, got = p.post(t, "/v1/locks/acquire", serveClientToken, alice)
	if status != 423 || !strings.Contains(got["error"].(map[string]any)["message"].(string), "Bob Smith") {
		t.Fatalf("contended acquire: %d %v, want 423 naming Bob Smith", status, got)
	}
	status, got = p.post(t, "/v1/locks/release", serveClientToken, `{"session": "s-81", "keys": ["policy/12345"]}`)
	if status != 200 || len(got["released"].([]any)) != 1 {
		t.Fatalf("release: %d %v", status, got)
	}
	if status, got = p.post(t, "/v1/locks/acquire", serveClientToken, alice); status != 200 {
		t.Fatalf("acquire after release: %d %v", status, got)
	}

	// An open event stream must not hold shutdown up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+serveAdminToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, stream)
	}
	defer stream.Body.Close()

	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if _, err := io.Copy(io.Discard, stream.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("event stream ended with %v", err)
	}
	var stopped bool
	for len(p.logs) > 0 {
		if rec := <-p.logs; rec["msg"] == "stopped" {
			stopped = true
		}
	}
	if !stopped {
		t.Error(`no "stopped" log line: the shutdown was not graceful`)
	}

	// The embedded store kept Alice's lock across the restart.
	p = runServe(t, dir)
	status, got = p.post(t, "/v1/locks/acquire", serveClientToken, bob)
	if status != 423 {
		t.Fatalf("after restart: %d %v, want 423 (Alice's lock is durable)", status, got)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "serve", "--listen", "0.0.0.0:0", "--store", t.TempDir())
	cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=", "HOLDFAST_CONFIG=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve without tokens on 0.0.0.0: %v, want a failure\n%s", err, out)
	}
	if !strings.Contains(string(out), "loopback") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
}

// With --log-format json, a server that fails after its log has started
// says why in a JSON line too, with the exit code it ends with, so that a
// collector reading JSON lines gets every line it writes.
func TestServeFailureIsLoggedAsJSON(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		flags []string
		code  int
		why   string
	}{
		{[]string{"--listen", taken.Addr().String(), "--store", t.TempDir()}, exitError, "address already in use"},
		{[]string{"--listen", "127.0.0.1:0", "--store", "etcd://localhost:2379"}, exitUsage, "not supported yet"},
	} {
		cmd := exec.Command(binary, append([]string{"serve", "--log-format", "json"}, tc.flags...)...)
		cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=", "HOLDFAST_CONFIG=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
			t.Fatalf("serve %v: %v, want exit code %d\n%s", tc.flags, err, tc.code, out)
		}
		var last map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			last = nil
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Fatalf("serve %v wrote a line that is not JSON: %q", tc.flags, line)
			}
		}
		if last["level"] != "ERROR" || last["msg"] != "holdfast serve failed" || last["exit_code"] != float64(tc.code) ||
			!strings.Contains(fmt.Sprint(last["error"]), tc.why) {
			t.Errorf("serve %v: last line %v, want the failure (%s) and exit code %d", tc.flags, last, tc.why, tc.code)
		}
	}
}

func TestServeRefusesUnsupportedStores(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"redis://localhost:6379", "etcd://localhost:2379"} {
		cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--store", dsn)
		cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=", "HOLDFAST_CONFIG=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not supported yet") {
			t.Errorf("--store %s: %v\n%s", dsn, err, out)
		}
	}
}

// halfBody sends an acquire with the extra header lines and the first
// bytes of a 1000-byte body, then nothing more, as a client that went
// quiet does. The connection closes with the test.
func (p *servedProcess) halfBody(t *testing.T, header string) net.Conn {
	t.Helper()
	host := strings.TrimPrefix(p.url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// With Expect, the server says "100 Continue" once it reads the body.
	fmt.Fprintf(conn, "POST /v1/locks/acquire HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n{\"keys\":", host, header)
	return conn
}

// A second signal ends holdfast serve at once, while the first one's
// graceful shutdown waits for a request still in flight: here one whose
// client sent half its body and went quiet, which the server would wait
// for until its read timeout (30 s).
func TestServeSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	p := runServe(t, t.TempDir(), "--shutdown-timeout", "5m")
	conn := p.halfBody(t, "Authorization: Bearer "+serveClientToken+"\r\n")
	// Signal only once the request is in flight, its body being read.
	conn.SetReadDeadline(time.Now().Add(serveWait))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("the server did not start reading the body: %q, %v", line, err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for shutting := false; !shutting; {
		select {
		case rec := <-p.logs:
			shutting = strings.HasPrefix(fmt.Sprint(rec["msg"]), "shutting down")
		case <-time.After(serveWait):
			t.Fatal(`no "shutting down" log line after SIGTERM`)
		}
	}
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("holdfast serve exited (%v) before the request in flight ended: the test shows nothing", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(15 * time.Second):
		t.Fatal("holdfast serve was still waiting for the request in flight 15s after a second SIGTERM")
	}
}

// A request refused before its body is read (no token) does not wait for
// that body: a client that sent half of it and went quiet gets its 401
// and the connection is closed, so a graceful shutdown is not held up to
// the read timeout (30 s) by it.
func TestServeRefusalDoesNotWaitForTheBody(t *testing.T) {
	t.Parallel()
	p := runServe(t, t.TempDir(), "--shutdown-timeout", "5m")
	conn := p.halfBody(t, "")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Fatalf("half a body without a token: %s, close %v; want 401 and the connection closed", res.Status, res.Close)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("holdfast serve was still shutting down 15s after SIGTERM, waiting for the refused request's body")
	}
}
