-- Session writes that need no new index entries, and a sweep over live
-- sessions that reads only what it returns (docs/POSTGRES.md, "Heartbeats
-- update in place").
--
-- idle_after is never later than the session's idle deadline, and it is
-- what the sweep looks idle sessions up by, in place of idle_deadline. A
-- write keeps it where it is when the deadline only moves later (every
-- heartbeat and every other request of a session with an idle timeout),
-- so such an update changes no indexed column and PostgreSQL makes it in
-- place (HOT), without an entry in each of the table's indexes. The sweep
-- moves an idle_after it finds early up to its session's deadline.
-- idle_deadline stays exact, for the guards' functions.
--
-- Room on each page for the next version of its rows: an in-place update
-- needs it on the same page, and a full page sends the update to another
-- one, with a new entry in every index. It holds for pages written from
-- now on; an existing table's full pages keep their rows until rewritten.
ALTER TABLE {schema}.sessions SET (fillfactor = 75);
ALTER TABLE {schema}.sessions ADD COLUMN idle_after timestamptz;
UPDATE {schema}.sessions SET idle_after = idle_deadline WHERE idle_deadline IS NOT NULL;
DROP INDEX {schema}.sessions_idle_deadline;
CREATE INDEX sessions_idle_after ON {schema}.sessions (idle_after, id) WHERE idle_after IS NOT NULL;

-- Live sessions in id order, for the sweep's walk over them (WHERE
-- ended_at IS NULL AND id > $after ORDER BY id LIMIT $n). The only other
-- index on live sessions leads with user_id: a plan made on a schema
-- without statistics, and kept, read all of it and sorted on every page.
CREATE INDEX sessions_live_id ON {schema}.sessions (id) WHERE ended_at IS NULL;
