-- The lock table and everything the lock manager keeps beside it.
-- {schema} is replaced by the quoted schema name. Every key and session
-- column sorts bytewise (COLLATE "C"), as the lock manager compares them,
-- so that a key's descendants are one index range: key+'/' <= k < key+'0'.

CREATE TABLE {schema}.locks (
	key         text COLLATE "C" NOT NULL,
	session     text COLLATE "C" NOT NULL,
	user_id     text NOT NULL DEFAULT '',
	name        text NOT NULL DEFAULT '',
	shared      boolean NOT NULL,
	token       bigint NOT NULL,
	acquired_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	note        text NOT NULL DEFAULT '',
	PRIMARY KEY (key, session)
);
CREATE INDEX locks_session ON {schema}.locks (session, key);
CREATE INDEX locks_expires_at ON {schema}.locks (expires_at, key, session);
CREATE INDEX locks_user ON {schema}.locks (user_id, key, session);

CREATE TABLE {schema}.sessions (
	id              text COLLATE "C" PRIMARY KEY,
	user_id         text NOT NULL DEFAULT '',
	name            text NOT NULL DEFAULT '',
	last_seen       timestamptz NOT NULL,
	idle_timeout_ns bigint NOT NULL DEFAULT 0,
	-- last_seen + idle timeout (rounded up to the microsecond) while the
	-- session is live and has an idle timeout; NULL otherwise.
	idle_deadline   timestamptz,
	ended_at        timestamptz,
	end_reason      text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_idle_deadline ON {schema}.sessions (idle_deadline, id) WHERE idle_deadline IS NOT NULL;
CREATE INDEX sessions_ended_at ON {schema}.sessions (ended_at, id) WHERE ended_at IS NOT NULL;
CREATE INDEX sessions_live_user ON {schema}.sessions (user_id, id) WHERE ended_at IS NULL;

CREATE TABLE {schema}.aggregates (
	member text COLLATE "C" PRIMARY KEY,
	root   text COLLATE "C" NOT NULL
);
CREATE INDEX aggregates_root ON {schema}.aggregates (root, member);

CREATE TABLE {schema}.lost (
	session      text COLLATE "C" NOT NULL,
	key          text COLLATE "C" NOT NULL,
	token        bigint NOT NULL,
	user_id      text NOT NULL DEFAULT '',
	name         text NOT NULL DEFAULT '',
	shared       boolean NOT NULL,
	acquired_at  timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	note         text NOT NULL DEFAULT '',
	reason       text NOT NULL,
	actor        text NOT NULL DEFAULT '',
	force_reason text NOT NULL DEFAULT '',
	at           timestamptz NOT NULL,
	reported     boolean NOT NULL DEFAULT false,
	PRIMARY KEY (session, key, token)
);
CREATE INDEX lost_at ON {schema}.lost (at, session, key, token);

CREATE TABLE {schema}.audit (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at          timestamptz NOT NULL,
	event       text NOT NULL,
	key         text COLLATE "C" NOT NULL,
	session     text COLLATE "C" NOT NULL,
	user_id     text NOT NULL DEFAULT '',
	name        text NOT NULL DEFAULT '',
	shared      boolean NOT NULL,
	token       bigint NOT NULL,
	acquired_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	note        text NOT NULL DEFAULT '',
	actor       text NOT NULL DEFAULT '',
	reason      text NOT NULL DEFAULT ''
);
CREATE INDEX audit_at ON {schema}.audit (at, id);
CREATE INDEX audit_key ON {schema}.audit (key, id);
CREATE INDEX audit_session ON {schema}.audit (session, id);

-- Fencing tokens. A sequence never hands out a value twice and never goes
-- back, whatever transactions roll back, and survives restarts.
CREATE SEQUENCE {schema}.token_seq AS bigint MINVALUE 1 NO CYCLE;

-- take_locks takes transaction-scoped advisory locks in the order given
-- (ascending ids). Where wait[i] is set it waits for the lock; elsewhere
-- it only tries, and raises HF001 if the lock is taken, so that the
-- caller retries its transaction instead of risking a deadlock.
CREATE FUNCTION {schema}.take_locks(ids bigint[], exclusive boolean[], wait boolean[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
		IF wait[i] THEN
			IF exclusive[i] THEN
				PERFORM pg_advisory_xact_lock(ids[i]);
			ELSE
				PERFORM pg_advisory_xact_lock_shared(ids[i]);
			END IF;
		ELSIF exclusive[i] THEN
			IF NOT pg_try_advisory_xact_lock(ids[i]) THEN
				RAISE EXCEPTION 'holdfast: lock % is taken; retrying in lock order', ids[i] USING ERRCODE = 'HF001';
			END IF;
		ELSIF NOT pg_try_advisory_xact_lock_shared(ids[i]) THEN
			RAISE EXCEPTION 'holdfast: lock % is taken; retrying in lock order', ids[i] USING ERRCODE = 'HF001';
		END IF;
	END LOOP;
END
$$;
