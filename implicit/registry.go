package implicit

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/holdfast/holdfast"
)

// Registry is the one place an application obtains its repositories from:
// it knows each record type's policy and hands out only decorated
// repositories. Keep the undecorated ones unexported in the package that
// builds them, so that the Registry is the only way in.
type Registry struct {
	svc   holdfast.Service
	types map[string]holdfast.TypePolicy
	def   holdfast.TypePolicy

	mu    sync.Mutex
	taken map[string]bool
}

// NewRegistry returns a Registry that locks through svc with the record
// types of cfg: pass the same holdfast.Config the Manager (or the holdfast
// server) runs with, so that every client applies the same policy to the
// same record type.
func NewRegistry(svc holdfast.Service, cfg holdfast.Config) (*Registry, error) {
	if svc == nil {
		return nil, errors.New("implicit: a holdfast.Service is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("implicit: %w", err)
	}
	return &Registry{svc: svc, types: cfg.Types, def: cfg.Default, taken: make(map[string]bool)}, nil
}

// Service is the lock service repositories lock through.
func (g *Registry) Service() holdfast.Service { return g.svc }

// PolicyOf returns the policy of recordType.
func (g *Registry) PolicyOf(recordType string) holdfast.TypePolicy {
	if p, ok := g.types[recordType]; ok {
		return p
	}
	return g.def
}

// Wrap decorates inner as the repository of recordType ("policy" for keys
// "policy/42"). A record type is wrapped once: two repositories of one
// type would be two doors into the same records.
func Wrap[ID comparable, T any](g *Registry, recordType string, inner Repository[ID, T]) (*Repo[ID, T], error) {
	if inner == nil {
		return nil, errors.New("implicit: a repository is required")
	}
	if recordType == "" || strings.Contains(recordType, "/") || holdfast.ValidateKey(recordType) != nil {
		return nil, fmt.Errorf("implicit: record type %q must be one key segment", recordType)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.taken[recordType] {
		return nil, fmt.Errorf("implicit: record type %q already has a repository", recordType)
	}
	g.taken[recordType] = true
	return &Repo[ID, T]{inner: inner, svc: g.svc, typ: recordType, policy: g.PolicyOf(recordType).Policy}, nil
}
