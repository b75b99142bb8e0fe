package holdfast

import (
	"fmt"
	"log/slog"
	"time"
)

// TypePolicy is the configuration of one record type (a key's first
// segment).
type TypePolicy struct {
	// Policy maps intents to modes; default ExclusiveWrite.
	Policy Policy
	// DefaultTTL is a lock's lifetime when the request gives none; default
	// 2 hours.
	DefaultTTL time.Duration
	// MaxTTL caps every requested lifetime; default 24 hours.
	MaxTTL time.Duration
	// IdleTimeout is given to sessions that lock this type without asking
	// for one; zero means none.
	IdleTimeout time.Duration
}

// Config configures a Manager. The zero value is usable.
type Config struct {
	// Types holds per-type policies, keyed by type ("policy", "order").
	Types map[string]TypePolicy
	// Default applies to types not in Types.
	Default TypePolicy
	// SweepInterval is how often expired locks and idle sessions are
	// removed in the background; default 1 second. Negative disables the
	// sweep (tests call Sweep).
	SweepInterval time.Duration
	// LostRetention is how long lost locks and ended sessions are
	// remembered for late heartbeats, and how long a session without an
	// idle timeout that holds no lock is kept unseen before the sweep
	// forgets it; default and minimum 24 hours.
	LostRetention time.Duration
	// AuditRetention is how long audit entries are kept; default 30 days.
	AuditRetention time.Duration
	// RestartGrace is how long after the Manager's first transaction a
	// session last seen before it, whose idle deadline has passed or comes
	// sooner, still counts as live: at most its idle timeout, if that is
	// shorter. Heartbeats cannot reach a lock service that is down, so
	// without it every session whose idle timeout ran out meanwhile ends
	// at the restart, before its clients could heartbeat again. Sessions
	// seen since the start are never affected. Default 1 minute; negative
	// turns it off.
	RestartGrace time.Duration
	// Logger receives background errors; default slog.Default().
	Logger *slog.Logger
	// Observer, when set, is told of every operation (for metrics).
	Observer Observer
}

// Observer receives one call per Manager operation with its outcome.
type Observer interface {
	Observe(op string, d time.Duration, err error)
}

// CommitObserver is an Observer that is also told of each store
// transaction that commits a group of concurrent operations: how many
// operations shared it (a batch counts its operations) and how long it
// took, its durable commit included. The first says how well concurrent
// operations share commits, the second how fast the store makes them
// durable.
type CommitObserver interface {
	Observer
	ObserveCommit(ops int, d time.Duration)
}

const (
	defaultTTL            = 2 * time.Hour
	defaultMaxTTL         = 24 * time.Hour
	defaultSweepInterval  = time.Second
	minLostRetention      = 24 * time.Hour
	defaultAuditRetention = 30 * 24 * time.Hour
	defaultRestartGrace   = time.Minute
)

func (p TypePolicy) withDefaults(d TypePolicy) TypePolicy {
	if p.Policy == "" {
		p.Policy = d.Policy
	}
	if p.DefaultTTL == 0 {
		p.DefaultTTL = d.DefaultTTL
	}
	if p.MaxTTL == 0 {
		p.MaxTTL = d.MaxTTL
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = d.IdleTimeout
	}
	return p
}

// Validate fills defaults and reports the first problem.
func (c *Config) Validate() error {
	c.Default = c.Default.withDefaults(TypePolicy{Policy: ExclusiveWrite, DefaultTTL: defaultTTL, MaxTTL: defaultMaxTTL})
	// A fresh map: the caller's may be shared with other configurations.
	types := make(map[string]TypePolicy, len(c.Types))
	for name, p := range c.Types {
		if err := ValidateKey(name); err != nil || KeyType(name) != name {
			return fmt.Errorf("type %q is not a single key segment", name)
		}
		types[name] = p.withDefaults(c.Default)
	}
	c.Types = types
	for name, p := range c.typesWithDefault() {
		switch p.Policy {
		case ExclusiveWrite, ExclusiveRead, ReadWrite:
		default:
			return fmt.Errorf("type %s: unknown policy %q (want exclusive-write, exclusive-read or read-write)", name, p.Policy)
		}
		if p.DefaultTTL <= 0 || p.MaxTTL <= 0 || p.IdleTimeout < 0 {
			return fmt.Errorf("type %s: durations must be positive", name)
		}
		if p.DefaultTTL > p.MaxTTL {
			return fmt.Errorf("type %s: default ttl %s is longer than max ttl %s", name, p.DefaultTTL, p.MaxTTL)
		}
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = defaultSweepInterval
	}
	if c.LostRetention < minLostRetention {
		c.LostRetention = minLostRetention
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = defaultAuditRetention
	}
	if c.RestartGrace == 0 {
		c.RestartGrace = defaultRestartGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (c *Config) typesWithDefault() map[string]TypePolicy {
	all := map[string]TypePolicy{"(default)": c.Default}
	for k, v := range c.Types {
		all[k] = v
	}
	return all
}

// policy returns the policy of key's type.
func (c *Config) policy(key string) TypePolicy {
	if p, ok := c.Types[KeyType(key)]; ok {
		return p
	}
	return c.Default
}
