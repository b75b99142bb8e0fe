package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/server"
)

func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return flags.Load(func(name string) string { return env[name] })
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "holdfast.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:7070" || cfg.Store != "./holdfast-data" || cfg.Schema != "holdfast" || cfg.MigrateOnStart || cfg.MaxBodyBytes != 1<<20 ||
		time.Duration(cfg.SweepInterval) != time.Second || time.Duration(cfg.ShutdownTimeout) != 30*time.Second ||
		time.Duration(cfg.StoreTimeout) != 5*time.Second || time.Duration(cfg.RestartGrace) != time.Minute || cfg.TokenFloor != 0 {
		t.Fatalf("defaults = %+v", cfg)
	}
	if g := cfg.Manager().RestartGrace; g != time.Minute {
		t.Fatalf("the Manager's restart grace = %s, want 1m", g)
	}
}

// restart_grace = 0 turns the grace off, which holdfast.Config spells as a
// negative duration, since its zero is the default.
func TestRestartGraceOff(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, []string{"--restart-grace", "0s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Manager().RestartGrace; g >= 0 {
		t.Fatalf("the Manager's restart grace = %s, want it off (negative)", g)
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
listen = "127.0.0.1:1001"
store = "/from/file"
sweep_interval = "3s"
max_body_bytes = 1000
token_floor = 70000
`)
	env := map[string]string{
		"HOLDFAST_CONFIG": path,
		"HOLDFAST_STORE":  "/from/env",
		"HOLDFAST_LISTEN": "127.0.0.1:1002",
	}
	cfg, err := load(t, []string{"--listen", "127.0.0.1:1003"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:1003" {
		t.Errorf("listen = %s, want the flag's", cfg.Listen)
	}
	if cfg.Store != "/from/env" {
		t.Errorf("store = %s, want the environment's", cfg.Store)
	}
	if time.Duration(cfg.SweepInterval) != 3*time.Second || cfg.MaxBodyBytes != 1000 {
		t.Errorf("sweep_interval = %s, max_body_bytes = %d, want the file's", cfg.SweepInterval, cfg.MaxBodyBytes)
	}
	if cfg.TokenFloor != 70000 {
		t.Errorf("token_floor = %d, want the file's", cfg.TokenFloor)
	}
	if time.Duration(cfg.AuditRetention) != DefaultAuditRetention {
		t.Errorf("audit_retention = %s, want the default", cfg.AuditRetention)
	}

	// --config wins over HOLDFAST_CONFIG.
	other := writeFile(t, `store = "/other/file"`)
	cfg, err = load(t, []string{"--config", other}, map[string]string{"HOLDFAST_CONFIG": path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "/other/file" {
		t.Errorf("store = %s, want the --config file's", cfg.Store)
	}
}

func TestEveryEnvKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{
		"HOLDFAST_LISTEN":           "0.0.0.0:8080",
		"HOLDFAST_STORE":            dir,
		"HOLDFAST_SCHEMA":           "locks",
		"HOLDFAST_STORE_TIMEOUT":    "2s",
		"HOLDFAST_MIGRATE_ON_START": "true",
		"HOLDFAST_TOKENS":           "admin:a1, reader:r1",
		"HOLDFAST_SWEEP_INTERVAL":   "250ms",
		"HOLDFAST_AUDIT_RETENTION":  "48h",
		"HOLDFAST_RESTART_GRACE":    "2m",
		"HOLDFAST_TOKEN_FLOOR":      "5000",
		"HOLDFAST_MAX_BODY_BYTES":   "2048",
		"HOLDFAST_TLS_CERT":         "c.pem",
		"HOLDFAST_TLS_KEY":          "k.pem",
		"HOLDFAST_SHUTDOWN_TIMEOUT": "5s",
		"HOLDFAST_LOG_FORMAT":       "json",
		"HOLDFAST_LOG_LEVEL":        "debug",
		"HOLDFAST_DEBUG_LISTEN":     "127.0.0.1:6060",
	}
	if len(env) != len(envKeys) {
		t.Fatalf("test covers %d keys, config has %d", len(env), len(envKeys))
	}
	cfg, err := load(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Listen: "0.0.0.0:8080", Store: dir, Tokens: []string{"admin:a1", "reader:r1"},
		SweepInterval: Duration(250 * time.Millisecond), AuditRetention: Duration(48 * time.Hour),
		MaxBodyBytes: 2048, TLSCert: "c.pem", TLSKey: "k.pem", ShutdownTimeout: Duration(5 * time.Second),
		LogFormat: "json", LogLevel: "debug",
	}
	if cfg.Listen != want.Listen || cfg.Store != want.Store || strings.Join(cfg.Tokens, ",") != "admin:a1,reader:r1" ||
		cfg.SweepInterval != want.SweepInterval || cfg.AuditRetention != want.AuditRetention ||
		cfg.MaxBodyBytes != want.MaxBodyBytes || cfg.TLSCert != want.TLSCert || cfg.TLSKey != want.TLSKey ||
		cfg.ShutdownTimeout != want.ShutdownTimeout || cfg.LogFormat != want.LogFormat || cfg.LogLevel != want.LogLevel ||
		cfg.Schema != "locks" || !cfg.MigrateOnStart || cfg.DebugListen != "127.0.0.1:6060" || time.Duration(cfg.StoreTimeout) != 2*time.Second ||
		time.Duration(cfg.RestartGrace) != 2*time.Minute || cfg.TokenFloor != 5000 {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
	tokens, err := cfg.ServerTokens()
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] != (server.Token{Role: server.Admin, Secret: "a1"}) || tokens[1] != (server.Token{Role: server.Reader, Secret: "r1"}) {
		t.Fatalf("tokens = %+v", tokens)
	}
}

func TestEveryFlag(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, []string{
		"--listen", "[::1]:9000", "--store", "/data", "--sweep-interval", "2s", "--audit-retention", "1h",
		"--max-body-bytes", "10", "--tls-cert", "c", "--tls-key", "k", "--shutdown-timeout", "1s",
		"--log-format", "json", "--log-level", "warn", "--schema", "locks", "--migrate-on-start",
		"--debug-listen", "localhost:6060", "--store-timeout", "750ms", "--restart-grace", "30s",
		"--token-floor", "9007199254740991",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "[::1]:9000" || cfg.Store != "/data" || time.Duration(cfg.SweepInterval) != 2*time.Second ||
		time.Duration(cfg.AuditRetention) != time.Hour || cfg.MaxBodyBytes != 10 || cfg.TLSCert != "c" ||
		cfg.TLSKey != "k" || time.Duration(cfg.ShutdownTimeout) != time.Second || cfg.LogFormat != "json" || cfg.LogLevel != "warn" ||
		cfg.Schema != "locks" || !cfg.MigrateOnStart || cfg.DebugListen != "localhost:6060" ||
		time.Duration(cfg.StoreTimeout) != 750*time.Millisecond || time.Duration(cfg.RestartGrace) != 30*time.Second ||
		cfg.TokenFloor != 1<<53-1 {
		t.Fatalf("got %+v", cfg)
	}
}

func TestTypePolicies(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
tokens = ["client:c1"]

[default_policy]
default_ttl = "1h"

[types.policy]
policy = "read-write"
default_ttl = "2h"
max_ttl = "24h"
idle_timeout = "5m"

[types.order]
policy = "exclusive-read"
`)
	cfg, err := load(t, []string{"--config", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := cfg.Manager()
	if err := hc.Validate(); err != nil {
		t.Fatal(err)
	}
	want := holdfast.TypePolicy{Policy: holdfast.ReadWrite, DefaultTTL: 2 * time.Hour, MaxTTL: 24 * time.Hour, IdleTimeout: 5 * time.Minute}
	if got := hc.Types["policy"]; got != want {
		t.Errorf("types.policy = %+v, want %+v", got, want)
	}
	if got := hc.Types["order"]; got.Policy != holdfast.ExclusiveRead || got.DefaultTTL != time.Hour {
		t.Errorf("types.order = %+v, want exclusive-read with the default policy's 1h ttl", got)
	}
	if len(cfg.Tokens) != 1 || cfg.Tokens[0] != "client:c1" {
		t.Errorf("tokens = %v", cfg.Tokens)
	}
}

func TestRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file string
		args []string
		env  map[string]string
		want string
	}{
		{name: "unknown file key", file: `lissen = "x:1"`, want: "unknown key lissen"},
		{name: "unknown policy", file: "[types.policy]\npolicy = \"exclusive\"", want: "unknown policy"},
		{name: "default ttl over max", file: "[types.policy]\ndefault_ttl = \"2h\"\nmax_ttl = \"1h\"", want: "longer than max ttl"},
		{name: "bad duration", env: map[string]string{"HOLDFAST_SWEEP_INTERVAL": "soon"}, want: "HOLDFAST_SWEEP_INTERVAL"},
		{name: "bad flag duration", args: []string{"--shutdown-timeout", "5"}, want: "--shutdown-timeout"},
		{name: "no tokens off loopback", args: []string{"--listen", "0.0.0.0:7070"}, want: "loopback"},
		{name: "no tokens on every interface", args: []string{"--listen", ":7070"}, want: "loopback"},
		{name: "bad role", env: map[string]string{"HOLDFAST_TOKENS": "root:supersecret"}, want: "unknown role"},
		{name: "tls half set", args: []string{"--tls-cert", "c.pem"}, want: "tls_cert and tls_key"},
		{name: "bad log level", args: []string{"--log-level", "loud"}, want: "log_level"},
		{name: "zero body limit", args: []string{"--max-body-bytes", "0"}, want: "max_body_bytes"},
		{name: "zero sweep interval", args: []string{"--sweep-interval", "0s"}, want: "sweep_interval 0s (from --sweep-interval): must be positive"},
		{name: "negative retention", args: []string{"--audit-retention", "-1h"}, want: "audit_retention -1h0m0s (from --audit-retention): must be positive"},
		{name: "zero shutdown timeout", env: map[string]string{"HOLDFAST_SHUTDOWN_TIMEOUT": "0s"}, want: "shutdown_timeout 0s (from HOLDFAST_SHUTDOWN_TIMEOUT): must be positive"},
		{name: "zero store timeout", args: []string{"--store-timeout", "0s"}, want: "store_timeout 0s (from --store-timeout): must be positive"},
		{name: "negative restart grace", env: map[string]string{"HOLDFAST_RESTART_GRACE": "-1m"}, want: "restart_grace -1m0s (from HOLDFAST_RESTART_GRACE): must not be negative; 0 turns it off"},
		{name: "token floor too large", args: []string{"--token-floor", "9007199254740992"}, want: "token_floor 9007199254740992 (from --token-floor): must be from 0 (none) to 9007199254740991"},
		{name: "negative token floor", env: map[string]string{"HOLDFAST_TOKEN_FLOOR": "-1"}, want: "token_floor -1 (from HOLDFAST_TOKEN_FLOOR): must be from 0 (none)"},
		{name: "token floor not a number", env: map[string]string{"HOLDFAST_TOKEN_FLOOR": "1e6"}, want: `token_floor "1e6" (from HOLDFAST_TOKEN_FLOOR): want a whole number, like 5000`},
		{name: "bad schema", args: []string{"--schema", "Locks; DROP"}, want: "schema"},
		{name: "bad migrate flag", env: map[string]string{"HOLDFAST_MIGRATE_ON_START": "maybe"}, want: `migrate_on_start "maybe" (from HOLDFAST_MIGRATE_ON_START): want true or false`},
		{name: "body limit not a number", env: map[string]string{"HOLDFAST_MAX_BODY_BYTES": "1MiB"}, want: `max_body_bytes "1MiB" (from HOLDFAST_MAX_BODY_BYTES): want a whole number of bytes, like 1048576`},
		{name: "profiler off loopback", args: []string{"--debug-listen", "0.0.0.0:6060"}, want: "debug_listen"},
		{name: "listen without port", args: []string{"--listen", "127.0.0.1"}, want: `listen "127.0.0.1" (from --listen): want host:port, like 127.0.0.1:7070`},
		{name: "profiler without port", args: []string{"--debug-listen", "127.0.0.1"}, want: `debug_listen "127.0.0.1" (from --debug-listen): want host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			_, err := load(t, args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "supersecret") {
				t.Fatalf("error reveals a token: %v", err)
			}
		})
	}
}

func TestUnknownEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"HOLDFAST_LISTN=127.0.0.1:7071", "HOLDFAST_LISTEN=127.0.0.1:7070", "HOLDFAST_CONFIG=", "HOLDFAST_TOKENS=admin:x",
		"HOLDFAST_SERVER=http://127.0.0.1:7070", "HOLDFAST_TOKEN=x", "HOLDFAST_SESSION=s-1", "HOLDFAST_DEBUG_LISTEN=",
		"HOLDFAST_TEST_POSTGRES=postgres://", "HOLDFAST_SERVR=http://x", "HOLDFAST_=", "PATH=/bin", "holdfast_listn=x",
	}
	if got, want := strings.Join(UnknownEnv(environ), " "), "HOLDFAST_ HOLDFAST_LISTN HOLDFAST_SERVR"; got != want {
		t.Errorf("UnknownEnv = %s, want %s", got, want)
	}
	var every []string
	for _, key := range envKeys {
		every = append(every, "HOLDFAST_"+strings.ToUpper(key)+"=x")
	}
	if got := UnknownEnv(every); len(got) != 0 {
		t.Errorf("UnknownEnv of every setting's variable = %v, want none", got)
	}
}

func TestTokensAllowAnyAddress(t *testing.T) {
	t.Parallel()
	if _, err := load(t, []string{"--listen", "0.0.0.0:7070"}, map[string]string{"HOLDFAST_TOKENS": "admin:x"}); err != nil {
		t.Fatal(err)
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "127.8.9.1:1": true, "[::1]:7070": true, "localhost:7070": true,
		":7070": false, "0.0.0.0:7070": false, "[::]:7070": false, "10.0.0.1:7070": false, "example.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// An operator with a file, an environment and flags must be told which one
// holds a refused value: the last to set it.
func TestRefusedNamesSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file string // FILE in want stands for its path
		env  map[string]string
		args []string
		want string
	}{
		{
			name: "file",
			file: "# limits\nmax_body_bytes = 0\n",
			want: "max_body_bytes 0 (from config file FILE, line 2): must be positive",
		},
		{
			name: "environment",
			env:  map[string]string{"HOLDFAST_MAX_BODY_BYTES": "0"},
			want: "max_body_bytes 0 (from HOLDFAST_MAX_BODY_BYTES): must be positive",
		},
		{
			name: "flag",
			args: []string{"--max-body-bytes", "0"},
			want: "max_body_bytes 0 (from --max-body-bytes): must be positive",
		},
		{
			name: "file, a negative token floor",
			file: "token_floor = -1\n",
			want: "token_floor -1 (from config file FILE, line 1): must be from 0 (none) to 9007199254740991: a larger token loses precision in clients that read JSON numbers as doubles",
		},
		{
			name: "file duration",
			file: "listen = \"127.0.0.1:7070\"\nstore_timeout = \"0s\"\n",
			want: "store_timeout 0s (from config file FILE, line 2): must be positive",
		},
		{
			name: "environment over file",
			file: `sweep_interval = "-1s"`,
			env:  map[string]string{"HOLDFAST_SWEEP_INTERVAL": "-2s"},
			want: "sweep_interval -2s (from HOLDFAST_SWEEP_INTERVAL): must be positive",
		},
		{
			name: "flag over environment",
			env:  map[string]string{"HOLDFAST_SWEEP_INTERVAL": "-2s"},
			args: []string{"--sweep-interval", "-1s"},
			want: "sweep_interval -1s (from --sweep-interval): must be positive",
		},
		{
			name: "bad environment over good file",
			file: `listen = "127.0.0.1:7071"`,
			env:  map[string]string{"HOLDFAST_LISTEN": "x"},
			want: `listen "x" (from HOLDFAST_LISTEN): want host:port, like 127.0.0.1:7070 (port 0 picks a free one)`,
		},
		{
			name: "bad flag over good environment",
			env:  map[string]string{"HOLDFAST_LISTEN": "127.0.0.1:7071"},
			args: []string{"--listen", "x"},
			want: `listen "x" (from --listen): want host:port, like 127.0.0.1:7070 (port 0 picks a free one)`,
		},
		{
			name: "file listen",
			file: `listen = "x"`,
			want: `listen "x" (from config file FILE, line 1): want host:port, like 127.0.0.1:7070 (port 0 picks a free one)`,
		},
		{
			name: "off loopback without tokens",
			env:  map[string]string{"HOLDFAST_LISTEN": "0.0.0.0:7070"},
			want: `listen "0.0.0.0:7070" (from HOLDFAST_LISTEN): no tokens are configured (HOLDFAST_TOKENS or tokens in the config file), so the server only listens on a loopback address`,
		},
		{
			name: "tokens from the environment",
			env:  map[string]string{"HOLDFAST_TOKENS": "admin:ok, root:supersecret"},
			want: `tokens (from HOLDFAST_TOKENS): token 2: unknown role "root" (want reader, client or admin)`,
		},
		{
			name: "tokens from the file",
			file: "\ntokens = [\"root:supersecret\"]\n",
			want: `tokens (from config file FILE, line 2): token 1: unknown role "root" (want reader, client or admin)`,
		},
		{
			name: "store from a flag",
			args: []string{"--store", ""},
			want: "store (from --store): a DSN is required",
		},
		{
			name: "schema from a flag",
			args: []string{"--schema", "Locks"},
			want: `schema "Locks" (from --schema): want 1-63 lower-case letters, digits and underscores, not starting with a digit`,
		},
		{
			name: "log level from the file",
			file: `log_level = "loud"`,
			want: `log_level "loud" (from config file FILE, line 1): want debug, info, warn or error`,
		},
		{
			name: "log format from the environment",
			env:  map[string]string{"HOLDFAST_LOG_FORMAT": "xml"},
			want: `log_format "xml" (from HOLDFAST_LOG_FORMAT): want text or json`,
		},
		{
			name: "profiler from a flag",
			args: []string{"--debug-listen", "0.0.0.0:6060"},
			want: `debug_listen "0.0.0.0:6060" (from --debug-listen): the profiler shows the process's memory, so it only listens on a loopback address`,
		},
		{
			name: "half of tls",
			env:  map[string]string{"HOLDFAST_TLS_KEY": "k.pem"},
			want: `tls_key "k.pem" (from HOLDFAST_TLS_KEY): tls_cert is not set; tls_cert and tls_key go together, set both or neither`,
		},
		{
			name: "type policy",
			file: "listen = \"127.0.0.1:7070\"\n\n[types.policy]\npolicy = \"exclusive\"\n",
			want: `types.policy (from config file FILE, line 3): type policy: unknown policy "exclusive" (want exclusive-write, exclusive-read or read-write)`,
		},
		{
			name: "type policy as a dotted key",
			file: "\ntypes.policy.policy = \"exclusive\"\n",
			want: `types.policy (from config file FILE, line 2): type policy: unknown policy "exclusive" (want exclusive-write, exclusive-read or read-write)`,
		},
		{
			name: "default policy",
			file: "[default_policy]\ndefault_ttl = \"2h\"\nmax_ttl = \"1h\"\n",
			want: "default_policy (from config file FILE, line 1): type (default): default ttl 2h0m0s is longer than max ttl 1h0m0s",
		},
		{
			name: "unparsable environment",
			env:  map[string]string{"HOLDFAST_SWEEP_INTERVAL": "soon"},
			want: `sweep_interval "soon" (from HOLDFAST_SWEEP_INTERVAL): want a duration like 90s, 5m or 2h: time: invalid duration "soon"`,
		},
		{
			name: "unparsable flag",
			args: []string{"--shutdown-timeout", "5"},
			want: `shutdown_timeout "5" (from --shutdown-timeout): want a duration like 90s, 5m or 2h: time: missing unit in duration "5"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, want := tc.args, tc.want
			if tc.file != "" {
				path := writeFile(t, tc.file)
				args = append([]string{"--config", path}, args...)
				want = strings.ReplaceAll(want, "FILE", path)
			}
			_, err := load(t, args, tc.env)
			if err == nil || err.Error() != want {
				t.Fatalf("err = %v\nwant  %s", err, want)
			}
			if strings.Contains(err.Error(), "supersecret") {
				t.Fatalf("error reveals a token: %v", err)
			}
		})
	}
}

// A value left at its default was set nowhere, so nothing is named.
func TestRefusedDefaultNamesNoSource(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxBodyBytes = 0
	if err := cfg.Validate(); err == nil || err.Error() != "max_body_bytes 0: must be positive" {
		t.Fatalf("err = %v, want max_body_bytes 0: must be positive", err)
	}
}
