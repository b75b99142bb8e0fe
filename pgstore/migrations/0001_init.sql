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

-- Audit entry ids. The store draws one ahead at the start of each write
-- transaction, so ids follow start order, not commit order.
CREATE SEQUENCE {schema}.audit_id_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE {schema}.audit (
	id          bigint PRIMARY KEY,
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

-- take_locks takes transaction-scoped advisory locks in ascending id
-- order. Where wait[i] is set it waits for the lock as long as it takes;
-- elsewhere (a lock whose id is below one the transaction holds already)
-- it waits at most brief_wait, so that a cycle of waits ends quickly in
-- lock_not_available (55P03) and the caller retries its transaction with
-- its locks taken in order.
CREATE FUNCTION {schema}.take_locks(ids bigint[], exclusive boolean[], wait boolean[], brief_wait text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	previous text := current_setting('lock_timeout');
	n integer := coalesce(array_length(ids, 1), 0);
BEGIN
	IF NOT (true = ALL (wait)) THEN
		PERFORM set_config('lock_timeout', brief_wait, true);
		FOR i IN 1 .. n LOOP
			CONTINUE WHEN wait[i];
			IF exclusive[i] THEN
				PERFORM pg_advisory_xact_lock(ids[i]);
			ELSE
				PERFORM pg_advisory_xact_lock_shared(ids[i]);
			END IF;
		END LOOP;
		PERFORM set_config('lock_timeout', previous, true);
	END IF;
	FOR i IN 1 .. n LOOP
		CONTINUE WHEN NOT wait[i];
		IF exclusive[i] THEN
			PERFORM pg_advisory_xact_lock(ids[i]);
		ELSE
			PERFORM pg_advisory_xact_lock_shared(ids[i]);
		END IF;
	END LOOP;
END
$$;

-- check_session raises serialization_failure (40001) unless the session
-- record is still the version (xmin, '' if absent) the transaction read
-- before it locked the session: the transaction then runs again.
CREATE FUNCTION {schema}.check_session(session_id text, seen text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	current text;
BEGIN
	SELECT xmin::text INTO current FROM {schema}.sessions WHERE id = session_id;
	IF coalesce(current, '') <> seen THEN
		RAISE EXCEPTION 'holdfast: session % changed since this transaction read it', session_id
			USING ERRCODE = 'serialization_failure';
	END IF;
END
$$;
