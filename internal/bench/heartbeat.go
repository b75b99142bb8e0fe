package bench

import (
	"context"
	"fmt"
	"time"
)

// heartbeatBatch is how many sessions one batched heartbeat request keeps
// alive: the most one /v1/batch takes, as an application server would
// send for all of its open editors.
const heartbeatBatch = 1000

// heartbeats: N sessions heartbeating, one request per heartbeat and in
// batches, on the systems that speak holdfast's API. The peers have no
// sessions and are not measured here. Every heartbeat asks for
// Config.IdleTimeout, as the editors' clients that keep sessions alive do.
func (r *runner) heartbeats(ctx context.Context) ([]row, error) {
	var systems []*system
	for _, s := range []*system{r.holdfast, r.holdfastPG, r.trivial} {
		if s != nil {
			systems = append(systems, s)
		}
	}
	sessions := make([]string, r.cfg.Sessions)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("heartbeat-%d", i)
	}
	idle := r.cfg.IdleTimeout
	note := "sessions without an idle timeout"
	if idle > 0 {
		note = fmt.Sprintf("sessions with an idle timeout of %s", idle)
	}
	var rows []row
	for _, s := range r.inTurn(systems) {
		hb := s.t.(heartbeater)
		// Start every session first: a session's first heartbeat is
		// written and waited for, the ones after are activity only.
		for i := 0; i < len(sessions); i += heartbeatBatch {
			if err := hb.heartbeatBatch(ctx, sessions[i:min(i+heartbeatBatch, len(sessions))], idle); err != nil {
				return nil, fmt.Errorf("%s: starting sessions: %w", s.name, err)
			}
		}
		clients := r.cfg.Clients
		r.logf("heartbeat: %s, one request per heartbeat…", s.name)
		single, err := r.measure(ctx, s, clients, func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
			next := c
			return 1, timed(lat, func() error {
				sess := sessions[next%len(sessions)]
				next += clients
				return hb.heartbeat(ctx, sess, idle)
			})
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		single.workload, single.system, single.mode = "heartbeat", s, "one request each"
		if s.locks() {
			single.note = note
		}
		rows = append(rows, single)

		r.logf("heartbeat: %s, %d per /v1/batch…", s.name, heartbeatBatch)
		batched, err := r.measure(ctx, s, clients, func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
			start := (c * heartbeatBatch) % len(sessions)
			batch := make([]string, 0, heartbeatBatch)
			for i := range min(heartbeatBatch, len(sessions)) {
				batch = append(batch, sessions[(start+i)%len(sessions)])
			}
			return len(batch), timed(lat, func() error { return hb.heartbeatBatch(ctx, batch, idle) })
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		batched.workload, batched.system, batched.mode = "heartbeat", s, fmt.Sprintf("%d per /v1/batch", heartbeatBatch)
		if s.locks() {
			batched.note = note
		}
		rows = append(rows, batched)
	}
	return rows, nil
}
