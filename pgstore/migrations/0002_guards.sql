-- Guarded writes and protected tables: the lock check inside the
-- application's own transaction, in SQL so that any language can use it.
-- {schema} is replaced by the quoted schema name.

-- lock_id is pgstore's advisory lock id of a name (advisory.go, lockID):
-- FNV-1a, 64 bits, of schema, 0, class, 0, name. pgstore's writers take a
-- key's lock exclusive before they read or change its lock rows; holding
-- it shared keeps every lock on that key as it is until commit. numeric
-- arithmetic, because bigint multiplication would overflow.
CREATE FUNCTION {schema}.lock_id(class text, name text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
	data bytea := convert_to(btrim('{schema}', '"'), 'UTF8') || '\x00'::bytea
		|| convert_to(class, 'UTF8') || '\x00'::bytea || convert_to(name, 'UTF8');
	h numeric := 14695981039346656037;
	low integer;
BEGIN
	FOR i IN 0 .. length(data) - 1 LOOP
		low := (h % 256)::integer;
		h := h - low + (low # get_byte(data, i));
		h := (h * 1099511628211) % 18446744073709551616;
	END LOOP;
	IF h >= 9223372036854775808 THEN
		h := h - 18446744073709551616;
	END IF;
	RETURN h::bigint;
END
$$;

-- resolve_key maps a key through aggregates as the lock manager does:
-- while some ancestor-or-self is a member, it is replaced by its root, the
-- longest member first.
CREATE FUNCTION {schema}.resolve_key(k text) RETURNS text
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
	p text;
	r text;
	mapped boolean;
BEGIN
	IF NOT EXISTS (SELECT FROM {schema}.aggregates) THEN
		RETURN k;
	END IF;
	FOR depth IN 1 .. 32 LOOP
		mapped := false;
		p := k;
		LOOP
			SELECT a.root INTO r FROM {schema}.aggregates a WHERE a.member = p;
			IF FOUND THEN
				k := r || substr(k, length(p) + 1);
				mapped := true;
				EXIT;
			END IF;
			EXIT WHEN strpos(p, '/') = 0;
			p := regexp_replace(p, '/[^/]*$', '');
		END LOOP;
		IF NOT mapped THEN
			RETURN k;
		END IF;
	END LOOP;
	RAISE EXCEPTION 'holdfast: key % resolves through more than 32 aggregates', k
		USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- clock_text prints a time for people, as the lock manager does.
CREATE FUNCTION {schema}.clock_text(t timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT AS $$
	SELECT CASE WHEN (t AT TIME ZONE 'UTC')::date = (clock_timestamp() AT TIME ZONE 'UTC')::date
		THEN to_char(t AT TIME ZONE 'UTC', 'HH24:MI "UTC"')
		ELSE to_char(t AT TIME ZONE 'UTC', 'Mon FMDD HH24:MI "UTC"') END
$$;

-- check_lock says whether session holds key under token (any token when
-- 0) right now, by the database clock: status 'held', 'lost' (with the
-- reason from the lost table or the session) or 'stale' (the session
-- holds the key under another token, given in lock_token). It first takes
-- the key's advisory lock shared, so whatever it finds stays true until
-- the calling transaction ends: a force-release, takeover, expiry sweep or
-- new grant of that key waits for the commit.
CREATE FUNCTION {schema}.check_lock(p_key text, p_session text, p_token bigint,
	OUT status text, OUT message text, OUT reason text, OUT lock_key text,
	OUT lock_user text, OUT lock_name text, OUT lock_shared boolean, OUT lock_token bigint,
	OUT lock_acquired_at timestamptz, OUT lock_expires_at timestamptz, OUT lock_note text,
	OUT actor text, OUT force_reason text)
LANGUAGE plpgsql AS $$
DECLARE
	l {schema}.locks%ROWTYPE;
	x {schema}.lost%ROWTYPE;
	s {schema}.sessions%ROWTYPE;
	clock timestamptz;
BEGIN
	-- The aggregates lock keeps the key's resolution as it is.
	PERFORM pg_advisory_xact_lock_shared({schema}.lock_id('a', ''));
	lock_key := {schema}.resolve_key(p_key);
	PERFORM pg_advisory_xact_lock_shared({schema}.lock_id('k', lock_key));
	clock := clock_timestamp();
	SELECT * INTO s FROM {schema}.sessions WHERE id = p_session;

	SELECT * INTO l FROM {schema}.locks WHERE key = lock_key AND session = p_session;
	IF FOUND THEN
		lock_user := l.user_id; lock_name := l.name; lock_shared := l.shared; lock_token := l.token;
		lock_acquired_at := l.acquired_at; lock_expires_at := l.expires_at; lock_note := l.note;
		IF l.expires_at <= clock THEN
			status := 'lost'; reason := 'expired';
			message := lock_key || ' is no longer held: the lock expired at ' || {schema}.clock_text(l.expires_at);
		ELSIF s.ended_at IS NOT NULL OR s.idle_deadline <= clock THEN
			status := 'lost'; reason := 'session_expired';
			message := lock_key || ' is no longer held: the session expired (no heartbeat within its idle timeout) at '
				|| {schema}.clock_text(coalesce(s.ended_at, s.idle_deadline));
		ELSIF p_token <> 0 AND l.token <> p_token THEN
			status := 'stale';
			message := lock_key || ' is held under a newer grant (token ' || l.token || ', not ' || p_token
				|| '): a write with the old token must not land';
		ELSE
			status := 'held'; message := '';
		END IF;
		RETURN;
	END IF;

	SELECT * INTO x FROM {schema}.lost
	WHERE session = p_session AND key = lock_key AND (p_token = 0 OR token = p_token)
	ORDER BY at DESC, token DESC LIMIT 1;
	IF FOUND THEN
		status := 'lost'; reason := x.reason; actor := x.actor; force_reason := x.force_reason;
		lock_user := x.user_id; lock_name := x.name; lock_shared := x.shared; lock_token := x.token;
		lock_acquired_at := x.acquired_at; lock_expires_at := x.expires_at; lock_note := x.note;
		message := lock_key || ' is no longer held: ' || CASE x.reason
			WHEN 'expired' THEN 'the lock expired at '
			WHEN 'released' THEN 'it was released at '
			WHEN 'force_released' THEN 'an administrator' || CASE WHEN x.actor <> '' THEN ' (' || x.actor || ')' ELSE '' END || ' released it at '
			WHEN 'taken_over' THEN 'it was taken over from another tab or device of the same user at '
			WHEN 'session_expired' THEN 'the session expired (no heartbeat within its idle timeout) at '
			ELSE 'the session ended at ' END
			|| {schema}.clock_text(x.at)
			|| CASE WHEN x.reason = 'force_released' THEN ': ' || x.force_reason ELSE '' END;
		RETURN;
	END IF;

	status := 'lost';
	IF s.ended_at IS NOT NULL THEN
		reason := s.end_reason;
		message := lock_key || ' is no longer held: the session ended at ' || {schema}.clock_text(s.ended_at);
	ELSE
		reason := 'never_held';
		message := lock_key || ' is not held by this session';
	END IF;
END
$$;

-- assert_lock is check_lock for any language: it returns the grant's
-- token, declares the session for protected tables (holdfast.session,
-- transaction-local), or raises object_not_in_prerequisite_state (55000)
-- with constraint holdfast_lock and the reason in the detail.
CREATE FUNCTION {schema}.assert_lock(p_key text, p_session text, p_token bigint DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	SELECT * INTO c FROM {schema}.check_lock(p_key, p_session, p_token);
	IF c.status = 'held' THEN
		PERFORM set_config('holdfast.session', p_session, true);
		RETURN c.lock_token;
	END IF;
	RAISE EXCEPTION 'holdfast: %', c.message USING
		ERRCODE = 'object_not_in_prerequisite_state',
		CONSTRAINT = 'holdfast_lock',
		DETAIL = CASE c.status WHEN 'stale' THEN 'stale_token' ELSE c.reason END,
		HINT = 'acquire the lock again before writing';
END
$$;

-- fence_row is the trigger of a fenced table (pgstore.Fence): an UPDATE
-- that lowers the fence column (TG_ARGV[0]) is a write under an older
-- grant than the row's last one, and is refused (55000, constraint
-- holdfast_fence). An UPDATE that leaves it as it is passes.
CREATE FUNCTION {schema}.fence_row() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	stored bigint := (to_jsonb(OLD) ->> TG_ARGV[0])::bigint;
	given bigint := (to_jsonb(NEW) ->> TG_ARGV[0])::bigint;
BEGIN
	IF given IS DISTINCT FROM stored AND (given IS NULL OR given < stored) THEN
		RAISE EXCEPTION 'holdfast: the row was written under a newer grant (token %, not %): a write with the old token must not land',
			stored, coalesce(given::text, 'none') USING
			ERRCODE = 'object_not_in_prerequisite_state',
			CONSTRAINT = 'holdfast_fence',
			DETAIL = stored::text,
			TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = TG_ARGV[0];
	END IF;
	RETURN NEW;
END
$$;

-- protect_key refuses a change to the record of key while a session other
-- than the declared one (holdfast.session) holds it or an ancestor, by
-- the database clock. It holds the advisory locks of the key and its
-- ancestors shared until commit, so no grant can slip in between this
-- check and the write's commit.
CREATE FUNCTION {schema}.protect_key(p_key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	me text := coalesce(current_setting('holdfast.session', true), '');
	k text;
	keys text[];
	p text;
	h record;
	holders text := '';
BEGIN
	IF p_key IS NULL THEN
		RETURN;
	END IF;
	PERFORM pg_advisory_xact_lock_shared({schema}.lock_id('a', ''));
	k := {schema}.resolve_key(p_key);
	keys := ARRAY[k];
	p := k;
	WHILE strpos(p, '/') > 0 LOOP
		p := regexp_replace(p, '/[^/]*$', '');
		keys := keys || p;
	END LOOP;
	PERFORM pg_advisory_xact_lock_shared(id)
	FROM (SELECT {schema}.lock_id('k', x) AS id FROM unnest(keys) AS x ORDER BY 1) AS ids;
	FOR h IN
		SELECT l.* FROM {schema}.locks l JOIN {schema}.sessions s ON s.id = l.session
		WHERE l.key = ANY (keys) AND l.session <> me
		  AND l.expires_at > clock_timestamp()
		  AND s.ended_at IS NULL AND (s.idle_deadline IS NULL OR s.idle_deadline > clock_timestamp())
		ORDER BY l.key, l.session
	LOOP
		holders := holders || CASE WHEN holders = '' THEN '' ELSE '; ' END
			|| CASE WHEN h.key <> k THEN 'covered by ' || h.key || ', ' ELSE '' END
			|| CASE WHEN h.shared THEN 'being read by ' ELSE 'being edited by ' END
			|| coalesce(nullif(h.name, ''), nullif(h.user_id, ''), 'session ' || h.session)
			|| ' since ' || {schema}.clock_text(h.acquired_at) || ' (until ' || {schema}.clock_text(h.expires_at) || ')';
	END LOOP;
	IF holders <> '' THEN
		RAISE EXCEPTION 'holdfast: % is %', p_key, holders USING
			ERRCODE = 'lock_not_available',
			CONSTRAINT = 'holdfast_protect',
			DETAIL = k,
			HINT = 'acquire the lock, then declare the session: SET LOCAL holdfast.session = ''...''';
	END IF;
END
$$;

-- protect_row is the trigger of a protected table (pgstore.Protect).
-- TG_ARGV[0] is the key expression over the row's columns.
CREATE FUNCTION {schema}.protect_row() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	old_key text;
	new_key text;
BEGIN
	EXECUTE 'SELECT (' || TG_ARGV[0] || ')::text FROM (SELECT ($1).*) AS row' INTO old_key USING OLD;
	PERFORM {schema}.protect_key(old_key);
	IF TG_OP = 'UPDATE' THEN
		EXECUTE 'SELECT (' || TG_ARGV[0] || ')::text FROM (SELECT ($1).*) AS row' INTO new_key USING NEW;
		IF new_key IS DISTINCT FROM old_key THEN
			PERFORM {schema}.protect_key(new_key);
		END IF;
		RETURN NEW;
	END IF;
	RETURN OLD;
END
$$;
