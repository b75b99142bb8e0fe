// Package config reads the configuration of holdfast serve from defaults,
// a TOML file, HOLDFAST_* environment variables and flags, in rising
// precedence.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/server"
)

// schemaName is what pgstore accepts as a schema name, checked here so a
// typo fails at start with the other configuration errors.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Defaults.
const (
	DefaultListen          = "127.0.0.1:7070"
	DefaultStore           = "./holdfast-data"
	DefaultSweepInterval   = time.Second
	DefaultAuditRetention  = 30 * 24 * time.Hour
	DefaultMaxBodyBytes    = 1 << 20
	DefaultShutdownTimeout = 30 * time.Second
	DefaultLogFormat       = "text"
	DefaultLogLevel        = "info"
	DefaultSchema          = "holdfast"
	DefaultStoreTimeout    = 5 * time.Second
	DefaultRestartGrace    = time.Minute
)

// Config is everything holdfast serve can be told. The toml tags are the
// keys of the file; each key is also the environment variable HOLDFAST_ +
// the key in upper case, and the flag -- + the key with dashes.
type Config struct {
	// Listen is the address to serve on.
	Listen string `toml:"listen"`
	// Store is the DSN of the lock store: a directory for the embedded
	// durable store, "memory:" for a throwaway in-memory one, a
	// postgres:// URL for a PostgreSQL database, or (not yet supported)
	// redis://, etcd:// URLs.
	Store string `toml:"store"`
	// Schema is the PostgreSQL schema of holdfast's tables; only a
	// postgres:// store uses it.
	Schema string `toml:"schema"`
	// StoreTimeout bounds each transaction on PostgreSQL, and each write
	// and fsync of the embedded store: a database that stops answering,
	// or a disk that stops completing writes, fails requests with 503
	// after this long.
	StoreTimeout Duration `toml:"store_timeout"`
	// MigrateOnStart creates or upgrades the PostgreSQL tables at start,
	// as `holdfast migrate` does; otherwise a schema that is missing or
	// old stops the server.
	MigrateOnStart bool `toml:"migrate_on_start"`
	// Tokens are "role:token" pairs (HOLDFAST_TOKENS: comma separated).
	// There is no flag, so that secrets never show in a process listing.
	Tokens []string `toml:"tokens"`
	// SweepInterval is how often expired locks and idle sessions are
	// removed in the background.
	SweepInterval Duration `toml:"sweep_interval"`
	// AuditRetention is how long audit entries are kept.
	AuditRetention Duration `toml:"audit_retention"`
	// RestartGrace is how long after a start a session whose idle timeout
	// ran out while the server was down keeps its locks, so that its
	// client can heartbeat again (holdfast.Config.RestartGrace); 0 turns
	// it off.
	RestartGrace Duration `toml:"restart_grace"`
	// TokenFloor, when not 0, is raised to before the server serves: every
	// token it grants is then above it (holdfast.Manager.RaiseTokens). Set
	// it after restoring a backup, to the highest token the fenced
	// resources may have seen.
	TokenFloor int64 `toml:"token_floor"`
	// MaxBodyBytes limits request bodies; larger ones are refused with 400.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// TLSCert and TLSKey are PEM files; with both set the server speaks
	// HTTPS.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// SIGTERM.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// LogFormat is "text" or "json"; LogLevel "debug", "info", "warn" or
	// "error".
	LogFormat string `toml:"log_format"`
	LogLevel  string `toml:"log_level"`
	// DebugListen is a loopback address serving Go's profiler
	// (/debug/pprof/); empty, the default, serves none.
	DebugListen string `toml:"debug_listen"`

	// DefaultPolicy applies to record types without a [types.NAME] table.
	DefaultPolicy TypePolicy `toml:"default_policy"`
	// Types are per record type policies: [types.policy] policy =
	// "read-write". Only the file sets them.
	Types map[string]TypePolicy `toml:"types"`

	// sources are where each key's value was last set ("--listen",
	// "HOLDFAST_LISTEN", "config file holdfast.toml, line 3"), so that an
	// error can say which of them to fix. A key left at its default has
	// none.
	sources map[string]string
}

// TypePolicy is one record type's lock policy; zero fields take the
// defaults of holdfast.Config.
type TypePolicy struct {
	Policy      string   `toml:"policy"`
	DefaultTTL  Duration `toml:"default_ttl"`
	MaxTTL      Duration `toml:"max_ttl"`
	IdleTimeout Duration `toml:"idle_timeout"`
}

// Duration reads "90s", "5m" or "2h" from files, flags and the
// environment.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration like 90s, 5m or 2h: %w", err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
func (d Duration) String() string               { return time.Duration(d).String() }

// Default returns the configuration with every default filled in.
func Default() Config {
	return Config{
		Listen:          DefaultListen,
		Store:           DefaultStore,
		Schema:          DefaultSchema,
		StoreTimeout:    Duration(DefaultStoreTimeout),
		SweepInterval:   Duration(DefaultSweepInterval),
		AuditRetention:  Duration(DefaultAuditRetention),
		RestartGrace:    Duration(DefaultRestartGrace),
		MaxBodyBytes:    DefaultMaxBodyBytes,
		ShutdownTimeout: Duration(DefaultShutdownTimeout),
		LogFormat:       DefaultLogFormat,
		LogLevel:        DefaultLogLevel,
	}
}

// Flags are holdfast serve's flags: --config, and one for each setting but
// tokens and the types.
type Flags struct {
	fs     *flag.FlagSet
	config *string
	values map[string]*string // by key
}

// flagKeys are the settings that flags can set, with their usage and the
// default they show.
var flagKeys = []struct {
	key, usage, def string
	isBool          bool
}{
	{"listen", "`address` to serve on", DefaultListen, false},
	{"store", "lock store `DSN`: a directory for the embedded store, or a postgres:// URL", DefaultStore, false},
	{"schema", "PostgreSQL `schema` of holdfast's tables", DefaultSchema, false},
	{"store_timeout", "how long a request waits for PostgreSQL, or for the embedded store's disk, before failing with 503 (`duration`)", DefaultStoreTimeout.String(), false},
	{"migrate_on_start", "create or upgrade the PostgreSQL tables at start", "false", true},
	{"sweep_interval", "how often expired locks are swept (`duration`)", DefaultSweepInterval.String(), false},
	{"audit_retention", "how long audit entries are kept (`duration`)", DefaultAuditRetention.String(), false},
	{"restart_grace", "how long after a start sessions that went idle while the server was down keep their locks, at most their idle timeout; 0 turns it off (`duration`)", DefaultRestartGrace.String(), false},
	{"token_floor", "before serving, make every fencing token granted from now on greater than `N`; set it after restoring a backup (0: none)", "0", false},
	{"max_body_bytes", "largest request body in `bytes`", strconv.FormatInt(DefaultMaxBodyBytes, 10), false},
	{"tls_cert", "TLS certificate PEM `file`", "", false},
	{"tls_key", "TLS private key PEM `file`", "", false},
	{"shutdown_timeout", "how long in-flight requests may finish on SIGTERM (`duration`)", DefaultShutdownTimeout.String(), false},
	{"log_format", "log `format`: text or json", DefaultLogFormat, false},
	{"log_level", "log `level`: debug, info, warn or error", DefaultLogLevel, false},
	{"debug_listen", "loopback `address` serving Go's profiler at /debug/pprof/ (default: none)", "", false},
}

// RegisterFlags registers the flags on fs, which the caller then parses.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{
		fs:     fs,
		config: fs.String("config", "", "TOML configuration `file` (env HOLDFAST_CONFIG)"),
		values: make(map[string]*string, len(flagKeys)),
	}
	for _, k := range flagKeys {
		env := "HOLDFAST_" + strings.ToUpper(k.key)
		name, usage := strings.ReplaceAll(k.key, "_", "-"), k.usage+" (env "+env+")"
		if k.isBool {
			v := boolFlag(k.def)
			fs.Var(&v, name, usage)
			f.values[k.key] = (*string)(&v)
			continue
		}
		f.values[k.key] = fs.String(name, k.def, usage)
	}
	return f
}

// Load returns the defaults overridden by the file (--config or
// HOLDFAST_CONFIG), then by the environment (read through getenv), then by
// the flags given, validated. The flag set must have parsed the command
// line.
func (f *Flags) Load(getenv func(string) string) (Config, error) {
	given := make(map[string]bool)
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })

	cfg := Default()
	path := getenv("HOLDFAST_CONFIG")
	if given["config"] {
		path = *f.config
	}
	if path != "" {
		if err := cfg.readFile(path); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.readEnv(getenv); err != nil {
		return Config{}, err
	}
	for _, k := range flagKeys {
		name := strings.ReplaceAll(k.key, "_", "-")
		if !given[name] {
			continue
		}
		if err := cfg.set(k.key, *f.values[k.key], "--"+name); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// boolFlag is a flag kept as text, like the others, that may be given
// without a value: --migrate-on-start means --migrate-on-start=true.
type boolFlag string

func (b *boolFlag) String() string {
	if b == nil {
		return ""
	}
	return string(*b)
}

func (b *boolFlag) Set(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return errors.New("want true or false")
	}
	*b = boolFlag(v)
	return nil
}

func (b *boolFlag) IsBoolFlag() bool { return true }

func (c *Config) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	md, err := toml.Decode(string(data), c)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		return fmt.Errorf("config file %s: unknown key %s", path, undecoded[0])
	}
	// Errors name a setting, or a type's table, so each is recorded at the
	// first line that sets it or a field of it (md.Keys is in file order).
	named := make(map[string]bool)
	for _, key := range md.Keys() {
		name := key[:1]
		if key[0] == "types" && len(key) > 1 {
			name = key[:2]
		}
		if named[name.String()] {
			continue
		}
		named[name.String()] = true
		source := "config file " + path
		if line := keyLine(string(data), key); line > 0 {
			source += fmt.Sprintf(", line %d", line)
		}
		c.setSource(name.String(), source)
	}
	return nil
}

// keyLine returns the line of data, a TOML document, that sets key, or 0
// if the decoder does not know it. The decoder tells a key's line only in
// its errors, so key is decoded alone into a value that refuses it.
func keyLine(data string, key toml.Key) int {
	t := reflect.TypeFor[lineProbe]()
	for i := len(key) - 1; i >= 0; i-- {
		t = reflect.StructOf([]reflect.StructField{{
			Name: "Key",
			Type: t,
			Tag:  reflect.StructTag("toml:" + strconv.Quote(key[i])),
		}})
	}
	_, err := toml.Decode(data, reflect.New(t).Interface())
	if perr, ok := errors.AsType[toml.ParseError](err); ok {
		return perr.Position.Line
	}
	return 0
}

// lineProbe refuses every value, so that decoding it reports where the
// value is.
type lineProbe struct{}

func (lineProbe) UnmarshalTOML(any) error { return errors.New("probing for the line") }

// envKeys lists the settings that HOLDFAST_* variables can set.
var envKeys = []string{
	"listen", "store", "schema", "store_timeout", "migrate_on_start", "tokens", "sweep_interval", "audit_retention", "restart_grace", "token_floor", "max_body_bytes",
	"tls_cert", "tls_key", "shutdown_timeout", "log_format", "log_level", "debug_listen",
}

// clientEnv are the variables the client commands read, and the one that
// holdfast run sets for its command, which may run holdfast in turn.
var clientEnv = []string{"HOLDFAST_SERVER", "HOLDFAST_TOKEN", "HOLDFAST_SESSION"}

// UnknownEnv returns the names of the HOLDFAST_* variables of environ (as
// os.Environ gives it) that holdfast does not read, most likely misspelled
// ones, in order. HOLDFAST_TEST_* variables are the tests' own.
func UnknownEnv(environ []string) []string {
	known := map[string]bool{"HOLDFAST_CONFIG": true}
	for _, key := range envKeys {
		known["HOLDFAST_"+strings.ToUpper(key)] = true
	}
	for _, name := range clientEnv {
		known[name] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "HOLDFAST_") && !strings.HasPrefix(name, "HOLDFAST_TEST_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return unknown
}

func (c *Config) readEnv(getenv func(string) string) error {
	for _, key := range envKeys {
		name := "HOLDFAST_" + strings.ToUpper(key)
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := c.set(key, v, name); err != nil {
			return err
		}
	}
	return nil
}

// set sets one key from its string form, as environment variables and
// flags give it, and records source as where it was set.
func (c *Config) set(key, v, source string) error {
	c.setSource(key, source)
	var err error
	switch key {
	case "listen":
		c.Listen = v
	case "store":
		c.Store = v
	case "schema":
		c.Schema = v
	case "store_timeout":
		err = c.StoreTimeout.UnmarshalText([]byte(v))
	case "migrate_on_start":
		if c.MigrateOnStart, err = strconv.ParseBool(v); err != nil {
			err = errors.New("want true or false")
		}
	case "tokens":
		c.Tokens = nil
		for _, pair := range strings.Split(v, ",") {
			if pair = strings.TrimSpace(pair); pair != "" {
				c.Tokens = append(c.Tokens, pair)
			}
		}
	case "sweep_interval":
		err = c.SweepInterval.UnmarshalText([]byte(v))
	case "audit_retention":
		err = c.AuditRetention.UnmarshalText([]byte(v))
	case "restart_grace":
		err = c.RestartGrace.UnmarshalText([]byte(v))
	case "token_floor":
		if c.TokenFloor, err = strconv.ParseInt(v, 10, 64); err != nil {
			err = errors.New("want a whole number, like 5000")
		}
	case "shutdown_timeout":
		err = c.ShutdownTimeout.UnmarshalText([]byte(v))
	case "max_body_bytes":
		if c.MaxBodyBytes, err = strconv.ParseInt(v, 10, 64); err != nil {
			err = errors.New("want a whole number of bytes, like 1048576")
		}
	case "tls_cert":
		c.TLSCert = v
	case "tls_key":
		c.TLSKey = v
	case "log_format":
		c.LogFormat = v
	case "log_level":
		c.LogLevel = v
	case "debug_listen":
		c.DebugListen = v
	default:
		return fmt.Errorf("%s: unknown key %q", source, key)
	}
	if err != nil {
		return c.invalid(key, v, "%w", err)
	}
	return nil
}

func (c *Config) setSource(key, source string) {
	if c.sources == nil {
		c.sources = make(map[string]string)
	}
	c.sources[key] = source
}

// secretKeys are the keys whose values errors never show: tokens are
// secrets, and a store DSN may hold a password.
var secretKeys = map[string]bool{"tokens": true, "store": true}

// invalid returns an error about key's value, as "key value (from
// source): problem", so that every error names the setting, its value and
// where it was set in the same words.
func (c *Config) invalid(key string, value any, problem string, args ...any) error {
	subject := key
	switch v := value.(type) {
	case nil:
	case string:
		subject += " " + strconv.Quote(v)
	default:
		subject += fmt.Sprint(" ", v)
	}
	if secretKeys[key] {
		subject = key
	}
	if source := c.sources[key]; source != "" {
		subject += " (from " + source + ")"
	}
	return fmt.Errorf("%s: %w", subject, fmt.Errorf(problem, args...))
}

// Validate reports the first problem with c, naming where the value at
// fault was set.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return c.invalid("listen", c.Listen, "an address is required")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c.invalid("listen", c.Listen, "want host:port, like %s (port 0 picks a free one)", DefaultListen)
	}
	if c.Store == "" {
		return c.invalid("store", nil, "a DSN is required")
	}
	if !schemaName.MatchString(c.Schema) {
		return c.invalid("schema", c.Schema, "want 1-63 lower-case letters, digits and underscores, not starting with a digit")
	}
	if _, err := c.ServerTokens(); err != nil {
		return err
	}
	if len(c.Tokens) == 0 && !IsLoopback(c.Listen) {
		return c.invalid("listen", c.Listen, "no tokens are configured (HOLDFAST_TOKENS or tokens in the config file), so the server only listens on a loopback address")
	}
	if c.MaxBodyBytes <= 0 {
		return c.invalid("max_body_bytes", c.MaxBodyBytes, "must be positive")
	}
	for _, d := range []struct {
		key   string
		value Duration
	}{
		{"sweep_interval", c.SweepInterval},
		{"audit_retention", c.AuditRetention},
		{"shutdown_timeout", c.ShutdownTimeout},
		{"store_timeout", c.StoreTimeout},
	} {
		if d.value <= 0 {
			return c.invalid(d.key, d.value, "must be positive")
		}
	}
	if c.RestartGrace < 0 {
		return c.invalid("restart_grace", c.RestartGrace, "must not be negative; 0 turns it off")
	}
	if c.TokenFloor < 0 || c.TokenFloor > holdfast.MaxTokenFloor {
		return c.invalid("token_floor", c.TokenFloor, "must be from 0 (none) to %d: a larger token loses precision in clients that read JSON numbers as doubles", int64(holdfast.MaxTokenFloor))
	}
	if c.DebugListen != "" {
		if _, _, err := net.SplitHostPort(c.DebugListen); err != nil {
			return c.invalid("debug_listen", c.DebugListen, "want host:port, like 127.0.0.1:6060")
		}
		if !IsLoopback(c.DebugListen) {
			return c.invalid("debug_listen", c.DebugListen, "the profiler shows the process's memory, so it only listens on a loopback address")
		}
	}
	if c.TLSCert != "" && c.TLSKey == "" {
		return c.invalid("tls_cert", c.TLSCert, "tls_key is not set; tls_cert and tls_key go together, set both or neither")
	}
	if c.TLSKey != "" && c.TLSCert == "" {
		return c.invalid("tls_key", c.TLSKey, "tls_cert is not set; tls_cert and tls_key go together, set both or neither")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return c.invalid("log_format", c.LogFormat, "want text or json")
	}
	if _, err := c.SlogLevel(); err != nil {
		return err
	}
	// The default policy, then each type alone, so that an error names the
	// table at fault.
	hc := holdfast.Config{Default: c.DefaultPolicy.holdfast()}
	if err := hc.Validate(); err != nil {
		return c.invalid("default_policy", nil, "%w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Types)) {
		hc := holdfast.Config{
			Default: c.DefaultPolicy.holdfast(),
			Types:   map[string]holdfast.TypePolicy{name: c.Types[name].holdfast()},
		}
		if err := hc.Validate(); err != nil {
			return c.invalid(toml.Key{"types", name}.String(), nil, "%w", err)
		}
	}
	return nil
}

// ServerTokens parses Tokens. Its errors never include the secrets.
func (c *Config) ServerTokens() ([]server.Token, error) {
	tokens := make([]server.Token, 0, len(c.Tokens))
	for i, pair := range c.Tokens {
		t, err := server.ParseToken(pair)
		if err != nil {
			return nil, c.invalid("tokens", nil, "token %d: %w", i+1, err)
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

// Manager returns the holdfast.Config this configuration asks for.
func (c *Config) Manager() holdfast.Config {
	hc := holdfast.Config{
		Default:        c.DefaultPolicy.holdfast(),
		SweepInterval:  time.Duration(c.SweepInterval),
		AuditRetention: time.Duration(c.AuditRetention),
		RestartGrace:   time.Duration(c.RestartGrace),
	}
	if hc.RestartGrace == 0 {
		hc.RestartGrace = -1 // off; holdfast.Config takes 0 as its default
	}
	if len(c.Types) > 0 {
		hc.Types = make(map[string]holdfast.TypePolicy, len(c.Types))
		for name, p := range c.Types {
			hc.Types[name] = p.holdfast()
		}
	}
	return hc
}

func (p TypePolicy) holdfast() holdfast.TypePolicy {
	return holdfast.TypePolicy{
		Policy:      holdfast.Policy(p.Policy),
		DefaultTTL:  time.Duration(p.DefaultTTL),
		MaxTTL:      time.Duration(p.MaxTTL),
		IdleTimeout: time.Duration(p.IdleTimeout),
	}
}

// IsLoopback reports whether addr (host:port) listens only on loopback.
// An empty host means every interface, which is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SlogLevel is LogLevel for log/slog.
func (c *Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, c.invalid("log_level", c.LogLevel, "want debug, info, warn or error")
	}
	return l, nil
}
