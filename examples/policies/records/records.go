// Package records keeps the example's insurance policies and their
// coverages in SQLite. Its repositories are unexported: the only way to
// reach them is through Open, which hands out repositories decorated by an
// implicit.Registry, so no code path of the application can read for
// editing or write without the lock.
package records

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/implicit"
)

// Policy is an insurance policy; Coverages are the members of its
// aggregate.
type Policy struct {
	ID        int64
	Number    string
	Holder    string
	Premium   string
	Notes     string
	Coverages []Coverage
}

// Coverage is one risk a policy covers. Locking a coverage locks its policy.
type Coverage struct {
	ID         int64
	PolicyID   int64
	Kind       string
	Limit      string
	Deductible string
}

var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("no such record")
	// ErrStaleWrite: the row was written under a newer lock than the one
	// this write holds; a late write from a displaced holder is refused
	// here even if it slipped past the lock check.
	ErrStaleWrite = errors.New("the record was changed under a newer lock")
)

// Repositories are the decorated repositories of the application, and the
// queries that need no lock.
type Repositories struct {
	Policies  *implicit.Repo[int64, Policy]
	Coverages *implicit.Repo[int64, Coverage]

	db  *sql.DB
	svc holdfast.Service
}

const schema = `
CREATE TABLE IF NOT EXISTS policies (
	id      INTEGER PRIMARY KEY,
	number  TEXT NOT NULL UNIQUE,
	holder  TEXT NOT NULL,
	premium TEXT NOT NULL,
	notes   TEXT NOT NULL DEFAULT '',
	fence   INTEGER NOT NULL DEFAULT 0 -- token of the lock the row was last written under
);
CREATE TABLE IF NOT EXISTS coverages (
	id         INTEGER PRIMARY KEY,
	policy_id  INTEGER NOT NULL REFERENCES policies(id),
	kind       TEXT NOT NULL,
	limit_amt  TEXT NOT NULL,
	deductible TEXT NOT NULL,
	fence      INTEGER NOT NULL DEFAULT 0
);`

// Open creates the schema (and sample data in an empty database), maps
// every coverage onto its policy as an aggregate, and returns the
// repositories decorated by reg.
func Open(ctx context.Context, db *sql.DB, reg *implicit.Registry) (*Repositories, error) {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("records: schema: %w", err)
	}
	if err := seed(ctx, db); err != nil {
		return nil, fmt.Errorf("records: sample data: %w", err)
	}
	policies, err := implicit.Wrap[int64, Policy](reg, "policy", policyRepo{db})
	if err != nil {
		return nil, err
	}
	coverages, err := implicit.Wrap[int64, Coverage](reg, "coverage", coverageRepo{db})
	if err != nil {
		return nil, err
	}
	r := &Repositories{Policies: policies, Coverages: coverages, db: db, svc: reg.Service()}
	rows, err := db.QueryContext(ctx, `SELECT id, policy_id FROM coverages`)
	if err != nil {
		return nil, fmt.Errorf("records: coverages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Coverage
		if err := rows.Scan(&c.ID, &c.PolicyID); err != nil {
			return nil, err
		}
		if err := r.joinAggregate(ctx, c); err != nil {
			return nil, err
		}
	}
	return r, rows.Err()
}

// joinAggregate makes the coverage's key a member of its policy's key, so
// that editing the coverage locks the whole policy.
func (r *Repositories) joinAggregate(ctx context.Context, c Coverage) error {
	_, err := r.svc.SetAggregate(ctx, holdfast.Aggregate{
		Member: r.Coverages.Key(c.ID), Root: r.Policies.Key(c.PolicyID),
	})
	if err != nil {
		return fmt.Errorf("records: aggregate of coverage %d: %w", c.ID, err)
	}
	return nil
}

// ListPolicies returns every policy without coverages, by number. Lists
// take no locks; they show who holds what.
func (r *Repositories) ListPolicies(ctx context.Context) ([]Policy, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, number, holder, premium, notes FROM policies ORDER BY number`)
	if err != nil {
		return nil, fmt.Errorf("records: list policies: %w", err)
	}
	defer rows.Close()
	var out []Policy
	for rows.Next() {
		var p Policy
		if err := rows.Scan(&p.ID, &p.Number, &p.Holder, &p.Premium, &p.Notes); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

type policyRepo struct{ db *sql.DB }

func (r policyRepo) Find(ctx context.Context, id int64) (Policy, error) {
	p := Policy{ID: id}
	err := r.db.QueryRowContext(ctx, `SELECT number, holder, premium, notes FROM policies WHERE id = ?`, id).
		Scan(&p.Number, &p.Holder, &p.Premium, &p.Notes)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("records: policy %d: %w", id, err)
	}
	rows, err := r.db.QueryContext(ctx, `SELECT id, kind, limit_amt, deductible FROM coverages WHERE policy_id = ? ORDER BY id`, id)
	if err != nil {
		return p, fmt.Errorf("records: coverages of policy %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		c := Coverage{PolicyID: id}
		if err := rows.Scan(&c.ID, &c.Kind, &c.Limit, &c.Deductible); err != nil {
			return p, err
		}
		p.Coverages = append(p.Coverages, c)
	}
	return p, rows.Err()
}

// Update writes the editable fields under the verified grant's token.
func (r policyRepo) Update(ctx context.Context, id int64, p Policy) error {
	return fencedExec(ctx, r.db, "policies", id,
		`UPDATE policies SET holder = ?, premium = ?, notes = ?, fence = ? WHERE id = ? AND fence <= ?`,
		p.Holder, p.Premium, p.Notes)
}

func (r policyRepo) Delete(ctx context.Context, id int64) error {
	g, ok := implicit.GrantFrom(ctx)
	if !ok {
		return errors.New("records: delete without a verified lock")
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM coverages WHERE policy_id = ?`, id); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM policies WHERE id = ? AND fence <= ?`, id, g.Token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrStaleWrite
	}
	return tx.Commit()
}

type coverageRepo struct{ db *sql.DB }

func (r coverageRepo) Find(ctx context.Context, id int64) (Coverage, error) {
	c := Coverage{ID: id}
	err := r.db.QueryRowContext(ctx, `SELECT policy_id, kind, limit_amt, deductible FROM coverages WHERE id = ?`, id).
		Scan(&c.PolicyID, &c.Kind, &c.Limit, &c.Deductible)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("records: coverage %d: %w", id, err)
	}
	return c, nil
}

func (r coverageRepo) Update(ctx context.Context, id int64, c Coverage) error {
	return fencedExec(ctx, r.db, "coverages", id,
		`UPDATE coverages SET kind = ?, limit_amt = ?, deductible = ?, fence = ? WHERE id = ? AND fence <= ?`,
		c.Kind, c.Limit, c.Deductible)
}

func (r coverageRepo) Delete(ctx context.Context, id int64) error {
	g, ok := implicit.GrantFrom(ctx)
	if !ok {
		return errors.New("records: delete without a verified lock")
	}
	res, err := r.db.ExecContext(ctx, `DELETE FROM coverages WHERE id = ? AND fence <= ?`, id, g.Token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrStaleWrite
	}
	return nil
}

// fencedExec runs an UPDATE whose last parameters are fence, id and fence
// again: the row takes the grant's token unless a newer grant wrote it.
func fencedExec(ctx context.Context, db *sql.DB, table string, id int64, query string, args ...any) error {
	g, ok := implicit.GrantFrom(ctx)
	if !ok {
		return errors.New("records: write without a verified lock")
	}
	res, err := db.ExecContext(ctx, query, append(args, g.Token, id, g.Token)...)
	if err != nil {
		return fmt.Errorf("records: update %s %d: %w", table, id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = ?)`, id).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return ErrNotFound
	}
	return ErrStaleWrite
}

func seed(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM policies`).Scan(&n); err != nil || n > 0 {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i, p := range []struct {
		holder, premium string
		coverages       [][3]string
	}{
		{"Harbour Bakery Ltd", "1,240.00 EUR", [][3]string{{"Fire", "500,000 EUR", "1,000 EUR"}, {"Business interruption", "120,000 EUR", "2,500 EUR"}}},
		{"Nordlicht Logistics GmbH", "8,910.00 EUR", [][3]string{{"Cargo", "2,000,000 EUR", "5,000 EUR"}, {"Liability", "5,000,000 EUR", "10,000 EUR"}}},
		{"Mira Okafor", "312.50 EUR", [][3]string{{"Household contents", "60,000 EUR", "250 EUR"}}},
	} {
		res, err := tx.ExecContext(ctx, `INSERT INTO policies (number, holder, premium) VALUES (?, ?, ?)`,
			"P-"+strconv.Itoa(10041+i), p.holder, p.premium)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for _, c := range p.coverages {
			if _, err := tx.ExecContext(ctx, `INSERT INTO coverages (policy_id, kind, limit_amt, deductible) VALUES (?, ?, ?, ?)`,
				id, c[0], c[1], c[2]); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}
