"""The review read model's tables, indexes and the one statement that records a fact."""

from __future__ import annotations

from interlock.projections.engine.sql import Dialect

AGES = (60, 300, 900, 3600, 4 * 3600, 24 * 3600)  # pending longer than, in seconds
BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600)  # seconds
FAST = 10  # an approval within this many seconds of the ask is a fast one
TABLES = ("review_oversight", "review_chats", "review_calls", "review_facts", "reviews",
          "review_items", "review_receipts", "review_calls_waiting_idx",
          "review_facts_unviewed_idx",
          "review_facts_time_idx", "review_facts_actor_idx", "review_facts_self_idx",
          "review_facts_edited_idx", "review_facts_reasked_idx",
          "review_facts_fingerprint_idx", "review_stages", "review_delegations",
          "review_facts_delegated_idx", "review_facts_skipped_idx")
FACT_COLUMNS = ("chat_id, version, ref, tenant, agent, tool, kind, actor, requested_by,"
                " edited_by, asked_at, decided_at, wait_seconds, input, fingerprint,"
                " fingerprint_changes, prior_expiries, requester_approved, edited, reasked,"
                " fingerprint_changed, viewed, viewed_at, stage, for_actor, delegation_id,"
                " delegated, delegation_active, stage_skipped, stage_unapproved,"
                " policy")
_KEYS = "(tenant, decided_at, chat_id, version)"
_BUCKET_COLUMNS = ", ".join(f"b{i} bigint NOT NULL" for i in range(len(BUCKETS)))
DDL = (
    "CREATE TABLE IF NOT EXISTS {review_oversight} (tool text NOT NULL, kind text NOT NULL,"
    " n bigint NOT NULL, timed bigint NOT NULL, wait_sum double precision NOT NULL,"
    f" fast bigint NOT NULL, {_BUCKET_COLUMNS}, PRIMARY KEY (tool, kind))",
    "CREATE TABLE IF NOT EXISTS {review_chats} (chat_id text PRIMARY KEY, tenant text NOT NULL,"
    " agent text NOT NULL, turn_by text, turn_norm text, fingerprint text,"
    " fingerprints integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {review_calls} (chat_id text NOT NULL, ref text NOT NULL,"
    " tool text NOT NULL, input {json}, requested_by text, requested_norm text, edited_by text,"
    " edited_norm text, asked_at {ts}, prior_expiries integer NOT NULL,"
    " expired boolean NOT NULL, waiting boolean NOT NULL, policy text,"
    " PRIMARY KEY (chat_id, ref))",
    # Pending by age: the calls awaiting a decision, by when they were asked.
    "CREATE INDEX IF NOT EXISTS {review_calls_waiting_idx} ON {review_calls} (asked_at)"
    " WHERE waiting",
    "CREATE TABLE IF NOT EXISTS {review_facts} (chat_id text NOT NULL, version bigint NOT NULL,"
    " ref text NOT NULL, tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL,"
    " kind text NOT NULL, actor text NOT NULL, actor_norm text NOT NULL, requested_by text,"
    " requested_norm text, edited_by text, edited_norm text, requester_norm text,"
    " asked_at {ts}, decided_at {ts} NOT NULL, wait_seconds double precision, input {json},"
    " fingerprint text, fingerprint_changes integer NOT NULL, prior_expiries integer NOT NULL,"
    " requester_approved boolean NOT NULL, edited boolean NOT NULL, reasked boolean NOT NULL,"
    " fingerprint_changed boolean NOT NULL, key_word bigint NOT NULL, viewed boolean NOT NULL,"
    " viewed_at {ts}, stage text, for_actor text, for_actor_norm text, delegation_id text,"
    " delegated boolean NOT NULL, delegation_active boolean NOT NULL,"
    " stage_skipped boolean NOT NULL, stage_unapproved boolean NOT NULL, policy text,"
    " PRIMARY KEY (chat_id, version))",
    # A staged call's stages: whether each applies to its current input (by its `when`),
    # and whether it has an approving vote on that input (an edit clears both).
    "CREATE TABLE IF NOT EXISTS {review_stages} (chat_id text NOT NULL, ref text NOT NULL,"
    " idx integer NOT NULL, name text NOT NULL, applies boolean NOT NULL,"
    " approved boolean NOT NULL, PRIMARY KEY (chat_id, ref, idx))",
    # Delegations as the log has them so far (a revocation: from its place in the log on).
    "CREATE TABLE IF NOT EXISTS {review_delegations} (delegation_id text PRIMARY KEY,"
    " tenant text NOT NULL, delegator text NOT NULL, delegate text NOT NULL,"
    " starts_at {ts} NOT NULL, ends_at {ts} NOT NULL, revoked_at {ts})",
    # View receipts: when each principal (normalised) was first shown each input of a call.
    "CREATE TABLE IF NOT EXISTS {review_receipts} (chat_id text NOT NULL, ref text NOT NULL,"
    " viewer_norm text NOT NULL, input_sha256 text NOT NULL, first_at {ts} NOT NULL,"
    " PRIMARY KEY (chat_id, ref, viewer_norm, input_sha256))",
    "CREATE TABLE IF NOT EXISTS {reviews} (review_id text PRIMARY KEY, tenant text NOT NULL,"
    " status text NOT NULL, opened_by text NOT NULL, opened_at {ts} NOT NULL,"
    " query_name text NOT NULL, query_version integer NOT NULL, items integer NOT NULL,"
    " assessed integer NOT NULL, findings integer NOT NULL, signed_off_by text)",
    "CREATE TABLE IF NOT EXISTS {review_items} (review_id text NOT NULL, n integer NOT NULL,"
    " chat_id text NOT NULL, version bigint NOT NULL, ref text NOT NULL, verdict text,"
    " severity text, note text, assessed_by text, assessed_at {ts},"
    " PRIMARY KEY (review_id, n))",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_time_idx}} ON {{review_facts}} {_KEYS}",
    "CREATE INDEX IF NOT EXISTS {review_facts_actor_idx} ON {review_facts}"
    " (tenant, actor_norm, decided_at)",
    # The alarm and the rare conditions: each a partial index, so a query whose answer is
    # (nearly) empty does not walk the tenant's every decision to say so.
    f"CREATE INDEX IF NOT EXISTS {{review_facts_self_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE requester_approved",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_edited_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE edited",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_reasked_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE reasked",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_fingerprint_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE fingerprint_changed",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_unviewed_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE NOT viewed",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_delegated_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE delegated",
    f"CREATE INDEX IF NOT EXISTS {{review_facts_skipped_idx}} ON {{review_facts}} {_KEYS}"
    " WHERE stage_skipped",
)
_WAIT = {"postgresql": "extract(epoch FROM (%(at)s::timestamptz - c.asked_at))::float8",
         "sqlite": "(julianday(%(at)s) - julianday(c.asked_at)) * 86400.0"}
_AT = {"postgresql": "CAST(%(at)s AS timestamptz)", "sqlite": "%(at)s"}
_FACT = (
    "INSERT INTO {{review_facts}} SELECT c.chat_id, %(v)s, c.ref, h.tenant, h.agent, c.tool,"
    " %(k)s, %(a)s, %(an)s, c.requested_by, c.requested_norm, c.edited_by, c.edited_norm,"
    " COALESCE(c.edited_norm, c.requested_norm), c.asked_at, %(at)s, {wait}, c.input,"
    " h.fingerprint, CASE WHEN h.fingerprints > 1 THEN h.fingerprints - 1 ELSE 0 END,"
    " c.prior_expiries, COALESCE(%(k)s = 'approve'"
    " AND COALESCE(c.edited_norm, c.requested_norm) = %(an)s, false),"
    " c.edited_by IS NOT NULL, c.prior_expiries > 0, h.fingerprints > 1, %(kw)s,"
    " v.first_at IS NOT NULL, v.first_at,"
    " (SELECT s.name FROM {{review_stages}} s WHERE s.chat_id = c.chat_id AND s.ref = c.ref"
    " AND s.idx = %(si)s), %(fa)s, %(fan)s, %(di)s, %(dg)s,"
    " COALESCE((SELECT d.starts_at <= {at} AND {at} < d.ends_at AND d.revoked_at IS NULL"
    " FROM {{review_delegations}} d WHERE d.delegation_id = %(di)s), false),"
    " COALESCE(%(fin)s AND EXISTS (SELECT 1 FROM {{review_stages}} s"
    " WHERE s.chat_id = c.chat_id AND s.ref = c.ref AND NOT s.approved), false),"
    " COALESCE(%(fin)s AND EXISTS (SELECT 1 FROM {{review_stages}} s"
    " WHERE s.chat_id = c.chat_id AND s.ref = c.ref AND s.applies AND NOT s.approved), false),"
    " c.policy"
    " FROM {{review_calls}} c JOIN {{review_chats}} h ON h.chat_id = c.chat_id"
    " LEFT JOIN {{review_receipts}} v ON v.chat_id = c.chat_id AND v.ref = c.ref"
    " AND v.viewer_norm = %(an)s AND v.input_sha256 = %(h)s"
    " WHERE c.chat_id = %(c)s AND c.ref = %(r)s")
# A receipt counts for the decisions after it in the log: its principal's first showing of
# that input of the call is kept; a later one changes nothing.
RECEIPT = ("INSERT INTO {review_receipts} VALUES (%(c)s, %(r)s, %(vn)s, %(h)s, %(at)s)"
           " ON CONFLICT (chat_id, ref, viewer_norm, input_sha256) DO NOTHING")


# A candidate's rank per sampling method and dialect, as sampling.ranking orders them:
# sha256-v1 hashes "seed\nchat_id#version"; mix64-v2 mixes the stored key word with the
# seed's word (%(word)s) by lookup3 (PostgreSQL's hashint4extended). Ties: TIES.
RANK = {
    ("sha256-v1", "postgresql"): "sha256(convert_to(%(seed)s || chr(10) || chat_id || '#'"
                                 " || version::text, 'UTF8'))",
    ("sha256-v1", "sqlite"): "review_rank(%(seed)s, chat_id, version)",
    ("mix64-v2", "postgresql"): "hashint4extended(((key_word << 32) >> 32)::int4,"
                                " hashint4extended((key_word >> 32)::int4, %(word)s))",
    ("mix64-v2", "sqlite"): "review_mix64(key_word, %(word)s)",
}
TIES = {"postgresql": 'chat_id COLLATE "C", version', "sqlite": "chat_id, version"}


_BUCKET_VALUES = ", ".join(
    f"CASE WHEN f.wait_seconds <= {b} THEN 1 ELSE 0 END" for b in BUCKETS)  # constants
_BUCKET_SUMS = ", ".join(f"b{i} = {{review_oversight}}.b{i} + excluded.b{i}"
                         for i in range(len(BUCKETS)))
# One decision into the running figures per tool and kind (the fact must be written first).
OVERSIGHT = (
    "INSERT INTO {review_oversight} SELECT f.tool, f.kind, 1,"
    " CASE WHEN f.wait_seconds IS NULL THEN 0 ELSE 1 END, COALESCE(f.wait_seconds, 0),"
    f" CASE WHEN f.wait_seconds < {FAST} THEN 1 ELSE 0 END, {_BUCKET_VALUES}"
    " FROM {review_facts} f WHERE f.chat_id = %(c)s AND f.version = %(v)s AND true"
    " ON CONFLICT (tool, kind) DO UPDATE SET n = {review_oversight}.n + 1,"
    " timed = {review_oversight}.timed + excluded.timed,"
    " wait_sum = {review_oversight}.wait_sum + excluded.wait_sum,"
    f" fast = {{review_oversight}}.fast + excluded.fast, {_BUCKET_SUMS}")


def fact_sql(dialect: Dialect) -> str:
    """The INSERT of one decision's fact, joined from its call and chat."""
    return _FACT.format(wait=_WAIT[dialect], at=_AT[dialect])
