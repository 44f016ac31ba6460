--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: ledger_entries_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_entries_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      RAISE EXCEPTION 'ledger_entries is append-only';
    END;
    $$;

--
-- Name: tes_category_share(text, double precision, integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_category_share(p_category text, p_share double precision, p_own_slots integer, p_live_ms integer) RETURNS TABLE(lim integer, live integer)
    LANGUAGE sql STABLE
    AS $$
      SELECT greatest(1, floor(p_share * (CASE WHEN s.live_slots > 0 THEN s.live_slots ELSE p_own_slots END)))::int, s.live_slots
        FROM (SELECT coalesce(sum(w.slots), 0)::int AS live_slots FROM worker_slots w
               WHERE w.category = p_category AND w.heartbeat_at > tes_now() - (p_live_ms * interval '1 millisecond')) s
    $$;

--
-- Name: tes_change_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.tes_change_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: executions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.executions (
    id text NOT NULL,
    project_id text NOT NULL,
    api_key_id text NOT NULL,
    tool text NOT NULL,
    model text NOT NULL,
    category text NOT NULL,
    status text NOT NULL,
    arguments jsonb NOT NULL,
    price_version text NOT NULL,
    total_steps integer NOT NULL,
    reserved_micros bigint NOT NULL,
    charged_micros bigint DEFAULT 0 NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    idempotency_key text NOT NULL,
    request_digest text NOT NULL,
    output jsonb,
    error_code text,
    error_message text,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    settled_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    claims integer DEFAULT 0 NOT NULL,
    change_seq bigint DEFAULT nextval('public.tes_change_seq'::regclass) NOT NULL,
    audit_xid xid8 DEFAULT pg_current_xact_id(),
    CONSTRAINT executions_check CHECK (((charged_micros >= 0) AND (charged_micros <= reserved_micros))),
    CONSTRAINT executions_reserved_micros_check CHECK ((reserved_micros >= 0)),
    CONSTRAINT executions_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'waiting'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text, 'needs_review'::text]))),
    CONSTRAINT executions_total_steps_check CHECK ((total_steps >= 0))
);

--
-- Name: tes_claim_fair(text, double precision, integer, text, integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_claim_fair(p_category text, p_share double precision, p_own_slots integer, p_owner text, p_lease_ttl_ms integer, p_live_ms integer) RETURNS SETOF public.executions
    LANGUAGE plpgsql
    AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('tes_claim:' || p_category, 0));
      RETURN QUERY
      WITH RECURSIVE share AS (
         SELECT cs.lim FROM tes_category_share(p_category, p_share, p_own_slots, p_live_ms) cs
       ), running AS (
         SELECT l.project_id, (SELECT p.organization_id FROM projects p WHERE p.id = l.project_id) AS organization_id
           FROM execution_line l
          WHERE l.status = 'running' AND l.category = p_category
       ), by_project AS (
         SELECT r.project_id, count(*)::int AS n FROM running r GROUP BY r.project_id
       ), by_org AS (
         SELECT r.organization_id, count(*)::int AS n FROM running r GROUP BY r.organization_id
       ), queued_projects AS (
         (SELECT l.project_id, l.created_at AS head_created_at, l.execution_id AS head_id FROM execution_line l
           WHERE l.status = 'queued' AND l.category = p_category ORDER BY l.project_id, l.created_at, l.execution_id LIMIT 1)
         UNION ALL
         SELECT n.project_id, n.created_at, n.execution_id
           FROM queued_projects q
           CROSS JOIN LATERAL (
             SELECT l.project_id, l.created_at, l.execution_id FROM execution_line l
              WHERE l.status = 'queued' AND l.category = p_category AND l.project_id > q.project_id
              ORDER BY l.project_id, l.created_at, l.execution_id LIMIT 1
           ) n
       ), heads AS (
         SELECT qp.project_id, qp.head_created_at, qp.head_id,
                (SELECT p.organization_id FROM projects p WHERE p.id = qp.project_id) AS organization_id
           FROM queued_projects qp
       ), pick AS (
         SELECT h.head_id AS pick_id
           FROM heads h
           CROSS JOIN share
           LEFT JOIN by_project bp ON bp.project_id = h.project_id
           LEFT JOIN by_org bo ON bo.organization_id = h.organization_id
           LEFT JOIN project_category_limits pl ON pl.project_id = h.project_id AND pl.category = p_category
          WHERE coalesce(bp.n, 0) < coalesce(pl.max_running, share.lim)
            AND coalesce(bo.n, 0) < greatest(share.lim, coalesce(pl.max_running, 0))
          ORDER BY coalesce(bo.n, 0), coalesce(bp.n, 0), h.head_created_at, h.head_id
          LIMIT 1
       )
       UPDATE executions
          SET status = 'running', lease_owner = p_owner || ':' || (executions.claims + 1),
              lease_expires_at = tes_now() + (p_lease_ttl_ms * interval '1 millisecond'),
              started_at = coalesce(executions.started_at, tes_now()), claims = executions.claims + 1, updated_at = now()
        WHERE executions.id = (SELECT pick.pick_id FROM pick) AND executions.status = ANY((SELECT ARRAY['queued'])::text[])
        RETURNING executions.*;
    END $$;

--
-- Name: tes_execution_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_execution_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      IF (NEW.status, NEW.cancel_requested, NEW.charged_micros, NEW.output, NEW.error_code, NEW.error_message,
          NEW.started_at, NEW.finished_at)
         IS DISTINCT FROM
         (OLD.status, OLD.cancel_requested, OLD.charged_micros, OLD.output, OLD.error_code, OLD.error_message,
          OLD.started_at, OLD.finished_at) THEN
        NEW.change_seq := nextval('tes_change_seq');
        PERFORM pg_notify('tes_execution_changes', NEW.id);
      END IF;
      RETURN NEW;
    END $$;

--
-- Name: tes_execution_line(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_execution_line() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      IF TG_OP <> 'DELETE' AND NEW.status IN ('queued', 'running') THEN
        INSERT INTO execution_line (execution_id, category, project_id, status, created_at)
        VALUES (NEW.id, NEW.category, NEW.project_id, NEW.status, NEW.created_at)
        ON CONFLICT (execution_id) DO UPDATE
          SET status = EXCLUDED.status, category = EXCLUDED.category, project_id = EXCLUDED.project_id, created_at = EXCLUDED.created_at;
      ELSE
        DELETE FROM execution_line WHERE execution_id = OLD.id;
      END IF;
      RETURN NULL;
    END $$;

--
-- Name: tes_execution_webhooks(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_execution_webhooks() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    DECLARE written integer;
    BEGIN
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type, next_attempt_at, execution_snapshot)
      SELECT tes_new_id('msg'), w.id, NEW.project_id, NEW.id, 'execution.' || NEW.status, tes_now(),
             (SELECT jsonb_build_object(
                'execution', jsonb_build_object(
                  'id', NEW.id, 'tool', NEW.tool, 'model', NEW.model, 'status', NEW.status, 'arguments', NEW.arguments,
                  'priceVersion', NEW.price_version, 'totalSteps', NEW.total_steps, 'reservedMicros', NEW.reserved_micros,
                  'chargedMicros', NEW.charged_micros, 'cancelRequested', NEW.cancel_requested, 'output', NEW.output,
                  'errorCode', NEW.error_code, 'errorMessage', NEW.error_message,
                  'createdAt', to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  'startedAt', to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  'finishedAt', to_char(NEW.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
                'steps', coalesce((
                  SELECT jsonb_agg(jsonb_build_object(
                           'executionId', s.execution_id, 'index', s.index, 'name', s.name, 'status', s.status, 'costMicros', s.cost_micros,
                           'startedAt', to_char(s.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                           'finishedAt', to_char(s.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY s.index)
                    FROM execution_steps s WHERE s.execution_id = NEW.id AND s.project_id = NEW.project_id), '[]'::jsonb)))
        FROM webhook_endpoints w
       WHERE w.project_id = NEW.project_id AND w.deleted_at IS NULL AND ('execution.' || NEW.status) = ANY (w.events);
      GET DIAGNOSTICS written = ROW_COUNT;
      IF written > 0 THEN
        PERFORM pg_notify('tes_webhook_deliveries', '');
      END IF;
      RETURN NULL;
    END $$;

--
-- Name: tes_executions_audit_stamp(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_executions_audit_stamp() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      NEW.audit_xid := pg_current_xact_id();
      RETURN NEW;
    END $$;

--
-- Name: tes_files_revive_guard(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_files_revive_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    DECLARE
      content_key text := 'projects/' || NEW.project_id || '/uploads/' || NEW.sha256;
    BEGIN
      IF (OLD.deleted_at IS NOT NULL OR OLD.expires_at <= tes_now())
         AND NEW.deleted_at IS NULL AND NEW.expires_at > tes_now() THEN
        IF NEW.storage_key = OLD.storage_key THEN
          IF OLD.storage_key <> content_key THEN
            NEW.storage_key := content_key;
          ELSIF OLD.delete_claim_until > tes_now() THEN
            RAISE EXCEPTION 'file % is being deleted until %; retry after that', OLD.id, OLD.delete_claim_until
              USING ERRCODE = '40001';
          END IF;
        END IF;
        NEW.delete_claim := NULL;
        NEW.delete_claim_until := NULL;
      END IF;
      RETURN NEW;
    END $$;

--
-- Name: tes_fill_open_deadline(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_fill_open_deadline() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      NEW.lease_expires_at := tes_now() + interval '1 minute';
      RETURN NEW;
    END $$;

--
-- Name: tes_link_execution_files(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_link_execution_files() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
    BEGIN
      INSERT INTO execution_files (execution_id, file_id, project_id)
      SELECT NEW.id, f.id, NEW.project_id FROM files f
       WHERE f.project_id = NEW.project_id
         AND f.id IN (SELECT v #>> '{}' FROM jsonb_path_query(NEW.arguments, 'strict $.** ? (@.type() == "string" && @ starts with "file_")') AS v)
         FOR SHARE OF f
      ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $_$;

--
-- Name: tes_month(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_month() RETURNS date
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT date_trunc('month', tes_now() AT TIME ZONE 'UTC')::date $$;

--
-- Name: tes_new_id(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_new_id(prefix text) RETURNS text
    LANGUAGE plpgsql PARALLEL SAFE
    AS $$
    DECLARE
      alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
      ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
      bytes constant bytea := uuid_send(gen_random_uuid());
      hi bigint := 0;
      lo bigint := 0;
      out text := '';
    BEGIN
      FOR i IN 0..4 LOOP
        hi := (hi << 8) | get_byte(bytes, i);
        lo := (lo << 8) | get_byte(bytes, 9 + i);
      END LOOP;
      FOR i IN REVERSE 9..0 LOOP
        out := out || substr(alphabet, ((ms >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      FOR i IN REVERSE 7..0 LOOP
        out := out || substr(alphabet, ((hi >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      FOR i IN REVERSE 7..0 LOOP
        out := out || substr(alphabet, ((lo >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      RETURN prefix || '_' || out;
    END $$;

--
-- Name: tes_now(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_now() RETURNS timestamp with time zone
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() $$;

--
-- Name: tes_step_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_step_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      IF TG_OP = 'INSERT' OR (NEW.status, NEW.cost_micros, NEW.attempts, NEW.started_at, NEW.finished_at)
                             IS DISTINCT FROM (OLD.status, OLD.cost_micros, OLD.attempts, OLD.started_at, OLD.finished_at) THEN
        NEW.change_seq := nextval('tes_change_seq');
        PERFORM pg_notify('tes_execution_changes', NEW.execution_id);
      END IF;
      RETURN NEW;
    END $$;

--
-- Name: tes_steps_recorded(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_steps_recorded(exec_id text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
    BEGIN
      RETURN EXISTS (SELECT 1 FROM execution_steps s WHERE s.execution_id = exec_id);
    END $$;

--
-- Name: tes_submit_guard(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_submit_guard(lock_key text, price_version text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(lock_key, 0));
      RETURN (SELECT version FROM price_versions ORDER BY seq DESC LIMIT 1) IS NOT DISTINCT FROM price_version;
    END $$;

--
-- Name: tes_submit_guard(text, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tes_submit_guard(lock_key text, price_version text, project_id text, idempotency_key text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(lock_key, 0));
      IF EXISTS (SELECT 1 FROM executions b WHERE b.project_id = tes_submit_guard.project_id AND b.idempotency_key = tes_submit_guard.idempotency_key) THEN
        RETURN false;
      END IF;
      RETURN (SELECT version FROM price_versions ORDER BY seq DESC LIMIT 1) IS NOT DISTINCT FROM price_version;
    END $$;

--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_keys (
    id text NOT NULL,
    project_id text NOT NULL,
    name text NOT NULL,
    lookup_id text NOT NULL,
    digest bytea NOT NULL,
    scopes text[] NOT NULL,
    role text NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_keys_role_check CHECK ((role = ANY (ARRAY['ADMIN'::text, 'MEMBER'::text])))
);

--
-- Name: artifacts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.artifacts (
    id text NOT NULL,
    execution_id text NOT NULL,
    project_id text NOT NULL,
    step_index integer NOT NULL,
    format text NOT NULL,
    mime_type text NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    storage_key text NOT NULL,
    file_name text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    delete_claim uuid,
    delete_claim_until timestamp with time zone
);

--
-- Name: execution_files; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.execution_files (
    execution_id text NOT NULL,
    file_id text NOT NULL,
    project_id text NOT NULL
);

--
-- Name: execution_line; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.execution_line (
    execution_id text NOT NULL,
    category text NOT NULL,
    project_id text NOT NULL,
    status text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT execution_line_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='2000');

--
-- Name: execution_steps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.execution_steps (
    execution_id text NOT NULL,
    project_id text NOT NULL,
    index integer NOT NULL,
    name text NOT NULL,
    status text NOT NULL,
    cost_micros bigint DEFAULT 0 NOT NULL,
    external_ref text,
    checkpoint jsonb,
    error_code text,
    attempts integer DEFAULT 1 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    external boolean DEFAULT false NOT NULL,
    change_seq bigint DEFAULT nextval('public.tes_change_seq'::regclass) NOT NULL,
    CONSTRAINT execution_steps_cost_micros_check CHECK ((cost_micros >= 0)),
    CONSTRAINT execution_steps_index_check CHECK ((index >= 0)),
    CONSTRAINT execution_steps_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text])))
);

--
-- Name: files; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.files (
    id text NOT NULL,
    project_id text NOT NULL,
    sha256 text NOT NULL,
    format text NOT NULL,
    mime_type text NOT NULL,
    size_bytes bigint NOT NULL,
    storage_key text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    facts jsonb,
    delete_claim uuid,
    delete_claim_until timestamp with time zone
);

--
-- Name: ledger_audit_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_audit_state (
    id integer NOT NULL,
    ledger_xid xid8 DEFAULT '0'::xid8 NOT NULL,
    ledger_id bigint DEFAULT 0 NOT NULL,
    execution_xid xid8 DEFAULT '0'::xid8 NOT NULL,
    execution_id text DEFAULT ''::text NOT NULL,
    open_transactions text[] DEFAULT '{}'::text[] NOT NULL,
    open_executions text[] DEFAULT '{}'::text[] NOT NULL,
    ok boolean,
    problems jsonb DEFAULT '[]'::jsonb NOT NULL,
    checked_at timestamp with time zone,
    CONSTRAINT ledger_audit_state_id_check CHECK ((id = 1))
);

--
-- Name: ledger_audit_totals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_audit_totals (
    project_id text NOT NULL,
    account text NOT NULL,
    amount_micros bigint NOT NULL
);

--
-- Name: ledger_entries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_entries (
    id bigint NOT NULL,
    transaction_id text NOT NULL,
    project_id text NOT NULL,
    execution_id text,
    kind text NOT NULL,
    account text NOT NULL,
    amount_micros bigint NOT NULL,
    reference text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    audit_xid xid8 DEFAULT pg_current_xact_id(),
    CONSTRAINT ledger_entries_account_check CHECK ((account = ANY (ARRAY['funding'::text, 'available'::text, 'reserved'::text, 'charged'::text]))),
    CONSTRAINT ledger_entries_kind_check CHECK ((kind = ANY (ARRAY['credit'::text, 'reserve'::text, 'settle'::text, 'resolve'::text])))
);

--
-- Name: ledger_entries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ledger_entries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: ledger_entries_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ledger_entries_id_seq OWNED BY public.ledger_entries.id;

--
-- Name: organizations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.organizations (
    id text NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    project_id text NOT NULL,
    execution_id text NOT NULL,
    routing_key text NOT NULL,
    payload jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    published_at timestamp with time zone,
    trace_context text
);

--
-- Name: outbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: outbox_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.outbox_id_seq OWNED BY public.outbox.id;

--
-- Name: price_versions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.price_versions (
    seq bigint NOT NULL,
    version text NOT NULL,
    content_sha256 text NOT NULL,
    prices jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: price_versions_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.price_versions_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: price_versions_seq_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.price_versions_seq_seq OWNED BY public.price_versions.seq;

--
-- Name: project_category_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.project_category_limits (
    project_id text NOT NULL,
    category text NOT NULL,
    max_running integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT project_category_limits_max_running_check CHECK ((max_running > 0))
);

--
-- Name: projects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.projects (
    id text NOT NULL,
    organization_id text NOT NULL,
    name text NOT NULL,
    available_micros bigint DEFAULT 0 NOT NULL,
    reserved_micros bigint DEFAULT 0 NOT NULL,
    monthly_cap_micros bigint,
    cap_month date DEFAULT (date_trunc('month'::text, (now() AT TIME ZONE 'utc'::text)))::date NOT NULL,
    month_charged_micros bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT projects_available_micros_check CHECK ((available_micros >= 0)),
    CONSTRAINT projects_month_charged_micros_check CHECK ((month_charged_micros >= 0)),
    CONSTRAINT projects_monthly_cap_micros_check CHECK ((monthly_cap_micros >= 0)),
    CONSTRAINT projects_reserved_micros_check CHECK ((reserved_micros >= 0))
);

--
-- Name: rate_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rate_limits (
    key character varying(255) NOT NULL,
    points integer DEFAULT 0 NOT NULL,
    expire bigint
);

--
-- Name: settings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.settings (
    key text NOT NULL,
    value jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: tool_capabilities; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tool_capabilities (
    tool text NOT NULL,
    model text NOT NULL,
    available boolean NOT NULL,
    missing text[] DEFAULT '{}'::text[] NOT NULL,
    reported_by text NOT NULL,
    reported_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: usage_counters; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.usage_counters (
    project_id text NOT NULL,
    month date NOT NULL,
    request_count bigint DEFAULT 0 NOT NULL,
    execution_count bigint DEFAULT 0 NOT NULL,
    charged_micros bigint DEFAULT 0 NOT NULL
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    id text NOT NULL,
    endpoint_id text NOT NULL,
    project_id text NOT NULL,
    execution_id text NOT NULL,
    event_type text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    payload jsonb,
    event_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_status_code integer,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    execution_snapshot jsonb,
    CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])))
);

--
-- Name: webhook_endpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_endpoints (
    id text NOT NULL,
    project_id text NOT NULL,
    url text NOT NULL,
    secret text NOT NULL,
    events text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone
);

--
-- Name: worker_slots; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.worker_slots (
    worker_id text NOT NULL,
    category text NOT NULL,
    slots integer NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    CONSTRAINT worker_slots_slots_check CHECK ((slots > 0))
);

--
-- Name: ledger_entries id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries ALTER COLUMN id SET DEFAULT nextval('public.ledger_entries_id_seq'::regclass);

--
-- Name: outbox id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox ALTER COLUMN id SET DEFAULT nextval('public.outbox_id_seq'::regclass);

--
-- Name: price_versions seq; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.price_versions ALTER COLUMN seq SET DEFAULT nextval('public.price_versions_seq_seq'::regclass);

--
-- Name: api_keys api_keys_lookup_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_lookup_id_key UNIQUE (lookup_id);

--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

--
-- Name: artifacts artifacts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (id);

--
-- Name: execution_files execution_files_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_files
    ADD CONSTRAINT execution_files_pkey PRIMARY KEY (execution_id, file_id);

--
-- Name: execution_line execution_line_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_line
    ADD CONSTRAINT execution_line_pkey PRIMARY KEY (execution_id);

--
-- Name: execution_steps execution_steps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_steps
    ADD CONSTRAINT execution_steps_pkey PRIMARY KEY (execution_id, index);

--
-- Name: executions executions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_pkey PRIMARY KEY (id);

--
-- Name: executions executions_project_id_idempotency_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_project_id_idempotency_key_key UNIQUE (project_id, idempotency_key);

--
-- Name: files files_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.files
    ADD CONSTRAINT files_pkey PRIMARY KEY (id);

--
-- Name: files files_project_id_sha256_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.files
    ADD CONSTRAINT files_project_id_sha256_key UNIQUE (project_id, sha256);

--
-- Name: ledger_audit_state ledger_audit_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_audit_state
    ADD CONSTRAINT ledger_audit_state_pkey PRIMARY KEY (id);

--
-- Name: ledger_audit_totals ledger_audit_totals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_audit_totals
    ADD CONSTRAINT ledger_audit_totals_pkey PRIMARY KEY (project_id, account);

--
-- Name: ledger_entries ledger_entries_audit_xid_set; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.ledger_entries
    ADD CONSTRAINT ledger_entries_audit_xid_set CHECK ((audit_xid IS NOT NULL)) NOT VALID;

--
-- Name: ledger_entries ledger_entries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (id);

--
-- Name: organizations organizations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.organizations
    ADD CONSTRAINT organizations_pkey PRIMARY KEY (id);

--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

--
-- Name: price_versions price_versions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.price_versions
    ADD CONSTRAINT price_versions_pkey PRIMARY KEY (seq);

--
-- Name: price_versions price_versions_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.price_versions
    ADD CONSTRAINT price_versions_version_key UNIQUE (version);

--
-- Name: project_category_limits project_category_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_category_limits
    ADD CONSTRAINT project_category_limits_pkey PRIMARY KEY (project_id, category);

--
-- Name: projects projects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

--
-- Name: rate_limits rate_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rate_limits
    ADD CONSTRAINT rate_limits_pkey PRIMARY KEY (key);

--
-- Name: settings settings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);

--
-- Name: tool_capabilities tool_capabilities_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tool_capabilities
    ADD CONSTRAINT tool_capabilities_pkey PRIMARY KEY (tool, model);

--
-- Name: usage_counters usage_counters_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.usage_counters
    ADD CONSTRAINT usage_counters_pkey PRIMARY KEY (project_id, month);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);

--
-- Name: webhook_endpoints webhook_endpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id);

--
-- Name: worker_slots worker_slots_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.worker_slots
    ADD CONSTRAINT worker_slots_pkey PRIMARY KEY (worker_id, category);

--
-- Name: api_keys_project_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_keys_project_idx ON public.api_keys USING btree (project_id);

--
-- Name: artifacts_execution_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX artifacts_execution_idx ON public.artifacts USING btree (execution_id);

--
-- Name: artifacts_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX artifacts_expiry_idx ON public.artifacts USING btree (expires_at) WHERE (deleted_at IS NULL);

--
-- Name: execution_files_file_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX execution_files_file_idx ON public.execution_files USING btree (file_id);

--
-- Name: execution_line_queued_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX execution_line_queued_idx ON public.execution_line USING btree (category, project_id, created_at, execution_id) WHERE (status = 'queued'::text);

--
-- Name: execution_line_running_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX execution_line_running_idx ON public.execution_line USING btree (category, project_id) WHERE (status = 'running'::text);

--
-- Name: executions_api_key_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_api_key_idx ON public.executions USING btree (api_key_id, id DESC);

--
-- Name: executions_audit_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_audit_idx ON public.executions USING btree (audit_xid, id) WHERE (audit_xid IS NOT NULL);

--
-- Name: executions_category_started_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_category_started_idx ON public.executions USING btree (category, started_at) WHERE (started_at IS NOT NULL);

--
-- Name: executions_lease_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_lease_idx ON public.executions USING btree (lease_expires_at) WHERE ((status = ANY (ARRAY['queued'::text, 'running'::text, 'waiting'::text])) AND (lease_expires_at IS NOT NULL));

--
-- Name: executions_needs_review_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_needs_review_idx ON public.executions USING btree (id DESC) WHERE (status = 'needs_review'::text);

--
-- Name: executions_project_list_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_project_list_idx ON public.executions USING btree (project_id, id DESC);

--
-- Name: executions_project_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_project_status_idx ON public.executions USING btree (project_id, status, id DESC);

--
-- Name: executions_project_tool_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executions_project_tool_idx ON public.executions USING btree (project_id, tool, id DESC);

--
-- Name: files_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX files_expiry_idx ON public.files USING btree (expires_at) WHERE (deleted_at IS NULL);

--
-- Name: ledger_credit_reference_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ledger_credit_reference_idx ON public.ledger_entries USING btree (project_id, reference) WHERE ((kind = 'credit'::text) AND (account = 'available'::text) AND (reference IS NOT NULL));

--
-- Name: ledger_entries_audit_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_entries_audit_idx ON public.ledger_entries USING btree (audit_xid, id) WHERE (audit_xid IS NOT NULL);

--
-- Name: ledger_execution_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_execution_idx ON public.ledger_entries USING btree (execution_id) WHERE (execution_id IS NOT NULL);

--
-- Name: ledger_project_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_project_idx ON public.ledger_entries USING btree (project_id, account);

--
-- Name: ledger_project_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_project_time_idx ON public.ledger_entries USING btree (project_id, created_at, id) INCLUDE (account, amount_micros);

--
-- Name: ledger_transaction_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_transaction_idx ON public.ledger_entries USING btree (transaction_id);

--
-- Name: outbox_published_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_published_idx ON public.outbox USING btree (published_at) WHERE (published_at IS NOT NULL);

--
-- Name: outbox_unsent_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_unsent_idx ON public.outbox USING btree (id) WHERE (published_at IS NULL);

--
-- Name: projects_organization_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX projects_organization_idx ON public.projects USING btree (organization_id);

--
-- Name: rate_limits_expire_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rate_limits_expire_idx ON public.rate_limits USING btree (expire);

--
-- Name: usage_counters_month_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX usage_counters_month_idx ON public.usage_counters USING btree (month);

--
-- Name: webhook_deliveries_due_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_due_idx ON public.webhook_deliveries USING btree (next_attempt_at) WHERE (status = 'pending'::text);

--
-- Name: webhook_deliveries_endpoint_recent_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_endpoint_recent_idx ON public.webhook_deliveries USING btree (endpoint_id, created_at DESC, id DESC);

--
-- Name: webhook_deliveries_execution_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_execution_idx ON public.webhook_deliveries USING btree (execution_id);

--
-- Name: webhook_deliveries_finished_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_finished_idx ON public.webhook_deliveries USING btree (created_at) WHERE (status = ANY (ARRAY['delivered'::text, 'failed'::text]));

--
-- Name: webhook_deliveries_project_due_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_project_due_idx ON public.webhook_deliveries USING btree (project_id, next_attempt_at) WHERE (status = 'pending'::text);

--
-- Name: webhook_endpoints_project_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_endpoints_project_idx ON public.webhook_endpoints USING btree (project_id) WHERE (deleted_at IS NULL);

--
-- Name: execution_steps execution_steps_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER execution_steps_changed BEFORE INSERT OR UPDATE ON public.execution_steps FOR EACH ROW EXECUTE FUNCTION public.tes_step_changed();

--
-- Name: executions executions_audit_stamp; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_audit_stamp BEFORE UPDATE ON public.executions FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.reserved_micros IS DISTINCT FROM new.reserved_micros) OR (old.charged_micros IS DISTINCT FROM new.charged_micros) OR (old.project_id IS DISTINCT FROM new.project_id))) EXECUTE FUNCTION public.tes_executions_audit_stamp();

--
-- Name: executions executions_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_changed BEFORE UPDATE ON public.executions FOR EACH ROW EXECUTE FUNCTION public.tes_execution_changed();

--
-- Name: executions executions_line_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_line_delete AFTER DELETE ON public.executions FOR EACH ROW WHEN ((old.status = ANY (ARRAY['queued'::text, 'running'::text]))) EXECUTE FUNCTION public.tes_execution_line();

--
-- Name: executions executions_line_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_line_insert AFTER INSERT ON public.executions FOR EACH ROW WHEN ((new.status = ANY (ARRAY['queued'::text, 'running'::text]))) EXECUTE FUNCTION public.tes_execution_line();

--
-- Name: executions executions_line_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_line_update AFTER UPDATE OF status, category, project_id, created_at ON public.executions FOR EACH ROW WHEN ((((new.status IS DISTINCT FROM old.status) OR (new.category IS DISTINCT FROM old.category) OR (new.project_id IS DISTINCT FROM old.project_id) OR (new.created_at IS DISTINCT FROM old.created_at)) AND ((new.status = ANY (ARRAY['queued'::text, 'running'::text])) OR (old.status = ANY (ARRAY['queued'::text, 'running'::text]))))) EXECUTE FUNCTION public.tes_execution_line();

--
-- Name: executions executions_link_files; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_link_files AFTER INSERT ON public.executions FOR EACH ROW WHEN (jsonb_path_exists(new.arguments, 'strict $.**?(@.type() == "string" && @ starts with "file_")'::jsonpath)) EXECUTE FUNCTION public.tes_link_execution_files();

--
-- Name: executions executions_open_deadline; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_open_deadline BEFORE INSERT OR UPDATE ON public.executions FOR EACH ROW WHEN (((new.lease_expires_at IS NULL) AND (new.status = ANY (ARRAY['queued'::text, 'running'::text, 'waiting'::text])))) EXECUTE FUNCTION public.tes_fill_open_deadline();

--
-- Name: executions executions_webhooks; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executions_webhooks AFTER UPDATE OF status ON public.executions FOR EACH ROW WHEN (((new.status IS DISTINCT FROM old.status) AND (new.status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text, 'needs_review'::text])))) EXECUTE FUNCTION public.tes_execution_webhooks();

--
-- Name: files files_revive_guard; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER files_revive_guard BEFORE UPDATE ON public.files FOR EACH ROW EXECUTE FUNCTION public.tes_files_revive_guard();

--
-- Name: ledger_entries ledger_entries_no_rewrite; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_entries_no_rewrite BEFORE DELETE OR UPDATE ON public.ledger_entries FOR EACH ROW EXECUTE FUNCTION public.ledger_entries_append_only();

--
-- Name: api_keys api_keys_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: artifacts artifacts_execution_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES public.executions(id);

--
-- Name: execution_files execution_files_execution_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_files
    ADD CONSTRAINT execution_files_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES public.executions(id);

--
-- Name: execution_files execution_files_file_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_files
    ADD CONSTRAINT execution_files_file_id_fkey FOREIGN KEY (file_id) REFERENCES public.files(id);

--
-- Name: execution_steps execution_steps_execution_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.execution_steps
    ADD CONSTRAINT execution_steps_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES public.executions(id);

--
-- Name: executions executions_api_key_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES public.api_keys(id);

--
-- Name: executions executions_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: files files_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.files
    ADD CONSTRAINT files_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: ledger_entries ledger_entries_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT ledger_entries_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: project_category_limits project_category_limits_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_category_limits
    ADD CONSTRAINT project_category_limits_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: projects projects_organization_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES public.organizations(id);

--
-- Name: usage_counters usage_counters_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.usage_counters
    ADD CONSTRAINT usage_counters_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: webhook_deliveries webhook_deliveries_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_deliveries webhook_deliveries_execution_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES public.executions(id);

--
-- Name: webhook_endpoints webhook_endpoints_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- PostgreSQL database dump complete
--
