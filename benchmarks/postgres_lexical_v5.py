"""FROZEN COPY, for benchmarks only: the lexical statement as of 8cd1bac (schema 5 bounds
max_tf / min_len, term-level MaxScore), so benchmarks/postgres_lexical.py can time it side by
side with the current one on the same data (schema 8 keeps the columns it reads).

The PostgreSQL lexical arm: one statement, MaxScore pruning, exact BM25 in Python.

:func:`lexical_query` builds one statement that reads the collection's totals, the
query terms' document frequencies and stored bounds, and the postings, and returns the
candidates that can be in the top ``n`` together with what their exact scores need.
:func:`rescore` then computes every candidate's BM25 exactly as the embedded store does
(:func:`plait.stores.lexical.idf`, the same expression in the same evaluation order,
terms added in query order) and cuts the top ``n``, ties by row id. So the ranking is
the embedded store's to the last bit, whatever the SQL's own floating-point rounding.

Inside the statement (scores there use PostgreSQL's ``ln``; they differ from the exact
ones by far less than the margin ``m``, a relative 1e-9 of the largest possible score):

1. **Bounds.** Each term's upper bound is its weighted idf times the BM25 term factor at
   the term's largest stored ``tf`` and smallest stored field length (``max_tf`` /
   ``min_len`` in ``plait_lex_terms``, widened on every insert and left as they are on
   deletes, where they stay valid, only looser). The factor grows with ``tf`` and
   shrinks with the length (for ``k1`` ≥ 0, 0 ≤ ``b``), so no posting scores above it.
2. **Seed.** The postings of the highest-bound terms (the first, then more while their
   postings stay under a budget) give partial scores: lower bounds of real chunks'
   scores, so their ``n``-th best, less ``m``, is a threshold θ no top-``n`` chunk falls
   below.
3. **MaxScore.** Terms sorted by bound, weakest first: the longest prefix whose bounds
   sum below θ is *non-essential* — a chunk holding only those terms cannot reach θ.
   Candidates are the chunks in the postings of the other (essential) terms; their
   essential partial scores raise θ further (their ``n``-th best is a lower bound too),
   and a candidate whose partial score plus the non-essential bounds stays below θ is
   dropped without looking further. The survivors' non-essential postings are probed by
   primary key ``(collection, term, chunk)``; the long postings lists of frequent terms
   are never scanned.
4. **Cut with a window.** The survivors are walked best first (each checked against the
   filters by its chunk's primary key) until ``n`` pass; every passing candidate within
   ``2m`` of the ``n``-th is returned too, so the exact top ``n`` is always among the rows.

Why the exact top ``n`` survives: a pruned chunk's SQL score is below θ, which is below
the ``n``-th best SQL score minus ``m``; exact and SQL scores differ by less than ``m/2``,
so ``n`` returned chunks score strictly more, exactly. Filters and ``limit=None`` skip
the pruning (θ = −∞): every chunk of the query's postings is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from plait.stores.base import BM25Params, Filters
from plait.stores.postgres_queries import filter_sql
from postgres_lexical_sql import TermStats, lexical_keys, term_weights  # frozen with it: gone from the store

__all__ = ["PRUNE_MIN_POSTINGS", "SEED_POSTINGS", "Candidate", "lexical_query", "prunable", "rescore"]

#: Postings read to seed the threshold: the highest-bound terms' lists up to this many.
SEED_POSTINGS = 4000
#: Queries with fewer postings than this are scored exhaustively: below it, the
#: pruning's own reads cost more than they save.
PRUNE_MIN_POSTINGS = 20000

# One posting's contribution (the SQL's own estimate; the exact one is rescore's).
_CONTRIB = "u.idf * p.tf * (%(k1)s + 1.0) / (p.tf + %(k1)s * (1.0 - %(b)s + %(b)s * p.len / u.avgdl))"
_BOUND = "q.idf * q.max_tf * (%(k1)s + 1.0) / (q.max_tf + %(k1)s * (1.0 - %(b)s + %(b)s * q.min_len / q.avgdl))"

_HEAD = """
WITH c AS (
    SELECT n_chunks::float8 AS n, len_exact_total::float8 AS te, len_stems_total::float8 AS ts
    FROM plait_collections WHERE id = %(cid)s
),
q AS MATERIALIZED (
    SELECT x.i, t.id AS term, t.df, t.max_tf, t.min_len,
           CASE WHEN x.i <= 63 THEN 1::bigint << (x.i::int - 1) ELSE 0::bigint END AS bit,
           x.w * ln(1.0 + (c.n - t.df + 0.5) / (t.df + 0.5)) AS idf,
           coalesce(nullif(CASE x.f WHEN 0 THEN c.te ELSE c.ts END / c.n, 0), 1.0) AS avgdl
    FROM unnest(%(keys)s::text[], %(fields)s::int[], %(w)s::float8[]) WITH ORDINALITY AS x(key, f, w, i)
    JOIN plait_lex_terms t ON t.collection_id = %(cid)s AND t.key = x.key AND t.df > 0
    CROSS JOIN c
),
m AS (
    SELECT 1e-9 * (1.0 + coalesce(sum(abs(q.idf) * (%(k1)s + 1.0) + 1.0), 0)) AS v,
           %(prune)s AND coalesce(sum(q.df), 0) > %(prune_min)s AS prune
    FROM q
),
"""

# Every chunk of the query's postings scored (sorted by chunk, then summed: cheaper
# than hashing here).
_EXHAUSTIVE = """
scored AS MATERIALIZED (
    SELECT p.chunk_row, sum({contrib} ORDER BY u.i) AS score, bit_or(u.bit) AS mask{arrays}
    FROM q AS u JOIN plait_postings p ON p.collection_id = %(cid)s AND p.term = u.term
    GROUP BY p.chunk_row
),
"""

_PRUNED = """
u AS MATERIALIZED (
    SELECT b.*,
           sum(b.df) OVER (ORDER BY b.ub DESC, b.i ROWS UNBOUNDED PRECEDING) - b.df AS df_before,
           sum(b.ub) OVER (ORDER BY b.ub, b.i ROWS UNBOUNDED PRECEDING) AS low_ub
    FROM (SELECT q.*, {bound} AS ub FROM q) AS b
),
seed AS (
    SELECT p.chunk_row, sum({contrib} ORDER BY u.i) AS s
    FROM m, u JOIN plait_postings p ON p.collection_id = %(cid)s AND p.term = u.term
    WHERE m.prune AND u.df_before < %(seed)s
    GROUP BY p.chunk_row
),
theta AS (
    SELECT CASE WHEN m.prune THEN coalesce(
        (SELECT s FROM seed ORDER BY s DESC OFFSET %(limit)s - 1 LIMIT 1) - m.v, 0.0)
        ELSE '-Infinity'::float8 END AS t
    FROM m
),
ess AS MATERIALIZED (
    SELECT p.chunk_row, sum({contrib} ORDER BY u.i) AS s, bit_or(u.bit) AS mask{arrays}
    FROM theta, u JOIN plait_postings p ON p.collection_id = %(cid)s AND p.term = u.term
    WHERE u.low_ub >= theta.t
    GROUP BY p.chunk_row
),
ne AS (
    SELECT coalesce(max(u.low_ub), 0.0) AS v FROM u, theta WHERE u.low_ub < theta.t
),
theta2 AS (
    SELECT greatest(theta.t, coalesce(
        (SELECT s FROM ess ORDER BY s DESC OFFSET %(limit)s - 1 LIMIT 1) - m.v, theta.t)) AS t
    FROM theta, m WHERE m.prune
),
scored AS MATERIALIZED (
    SELECT e.chunk_row, e.s AS score, e.mask, e.ii, e.tt FROM ess e, m WHERE NOT m.prune
    UNION ALL
    SELECT e.chunk_row, e.s + coalesce(x.s, 0.0), e.mask | coalesce(x.mask, 0), e.ii, e.tt
    FROM ess e CROSS JOIN theta CROSS JOIN theta2 CROSS JOIN ne
    LEFT JOIN LATERAL (
        SELECT sum({contrib}) AS s, bit_or(u.bit) AS mask
        FROM u JOIN plait_postings p
            ON p.collection_id = %(cid)s AND p.term = u.term AND p.chunk_row = e.chunk_row
        WHERE ne.v > 0 AND u.low_ub < theta.t
    ) AS x ON true
    WHERE e.s + ne.v >= theta2.t
),
"""

_TAIL = """{top},
cut AS (
    SELECT CASE WHEN count(*) = %(limit)s THEN min(w.score) - 2 * m.v ELSE 'Infinity'::float8 END AS t
    FROM walk w, m GROUP BY m.v
),
extra AS (
    SELECT s.chunk_row, s.score, s.mask, s.ii, s.tt, k.chunk_id, k.len_exact, k.len_stems
    FROM scored s CROSS JOIN cut
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.len_exact, c.len_stems FROM plait_chunks c
        WHERE c.collection_id = %(cid)s AND c.id = s.chunk_row{where}
        OFFSET 0
    ) AS k
    WHERE s.score >= cut.t AND NOT EXISTS (SELECT 1 FROM walk w WHERE w.chunk_row = s.chunk_row)
)
SELECT r.chunk_id, r.chunk_row, r.len_exact, r.len_stems, coalesce(r.ii, t.ii), coalesce(r.tt, t.tt),
       c.n, c.te, c.ts, (SELECT array_agg(q.i) FROM q), (SELECT array_agg(q.df) FROM q)
FROM (SELECT * FROM walk UNION ALL SELECT * FROM extra) AS r CROSS JOIN c
CROSS JOIN LATERAL (
    SELECT array_agg(q.i) AS ii, array_agg(p.tf) AS tt
    FROM q JOIN plait_postings p
        ON p.collection_id = %(cid)s AND p.term = q.term AND p.chunk_row = r.chunk_row
    WHERE r.ii IS NULL AND (q.bit = 0 OR r.mask & q.bit <> 0)
) AS t
"""

# Without filters the top n is a top-n sort of the scores, then n chunk probes.
_TOP = """walk AS MATERIALIZED (
    SELECT s.chunk_row, s.score, s.mask, s.ii, s.tt, k.chunk_id, k.len_exact, k.len_stems
    FROM (SELECT * FROM scored ORDER BY score DESC, chunk_row LIMIT %(limit)s) AS s
    JOIN plait_chunks k ON k.collection_id = %(cid)s AND k.id = s.chunk_row
)"""
# With filters the scored chunks are walked best first, each checked by its primary key,
# until n pass (OFFSET 0 keeps the nested loop as written: never a scan of every chunk).
_WALK = """walk AS MATERIALIZED (
    SELECT s.chunk_row, s.score, s.mask, s.ii, s.tt, k.chunk_id, k.len_exact, k.len_stems
    FROM (SELECT * FROM scored ORDER BY score DESC, chunk_row OFFSET 0) AS s
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.len_exact, c.len_stems FROM plait_chunks c
        WHERE c.collection_id = %(cid)s AND c.id = s.chunk_row{where}
        OFFSET 0
    ) AS k
    LIMIT %(limit)s
)"""

# Without a limit every candidate is returned: its terms and frequencies are gathered
# while scoring. With one, only the returned rows' postings are read again, by key,
# for the terms their bit mask says they hold.
_ARRAYS = ", array_agg(u.i) AS ii, array_agg(p.tf) AS tt"
_NO_ARRAYS = ", NULL::bigint[] AS ii, NULL::integer[] AS tt"


def prunable(params: BM25Params) -> bool:
    """Whether the stored bounds hold for these parameters: the term factor grows with
    ``tf`` and shrinks with the length only for ``k1`` ≥ 0 and 0 ≤ ``b`` ≤ 1 (above 1 the
    length norm ``1 - b + b·len/avgdl`` can reach 0 or below for short chunks, so the bound
    taken at the shortest length no longer bounds), and the bounds add up only for
    non-negative field weights."""
    return (
        params.k1 >= 0 and 0 <= params.b <= 1 and params.exact_weight >= 0 and params.stems_weight >= 0
    )


def lexical_query(
    cid: int,
    exact: Sequence[str],
    stems: Sequence[str],
    *,
    limit: int | None,
    filters: Filters | None,
    params: BM25Params,
    prune: bool = True,
    large: bool = True,
    prune_min: int = PRUNE_MIN_POSTINGS,
    seed: int = SEED_POSTINGS,
) -> tuple[sql.Composed, dict[str, Any]] | None:
    """The lexical arm for collection ``cid`` as one statement (rows for :func:`rescore`),
    or None when the query has no term. ``prune`` False scores every chunk of the
    query's postings (the reference the pruned query is tested against); so does
    ``large`` False (a collection known to be small, where pruning cannot pay: the
    statement is then a plain exhaustive one). ``prune_min`` and ``seed`` are the
    postings thresholds :data:`PRUNE_MIN_POSTINGS` and :data:`SEED_POSTINGS` (tests
    lower them to prune tiny corpora)."""
    keys, fields = lexical_keys(exact, stems, params)
    if not keys:
        return None
    where, where_params = filter_sql(filters)
    weights = (float(params.exact_weight), float(params.stems_weight))
    pruning = prune and limit is not None and not where_params and prunable(params) and large
    args: dict[str, Any] = {
        "cid": cid,
        "keys": keys,
        "fields": fields,
        "w": [weights[f] for f in fields],
        "k1": float(params.k1),
        "b": float(params.b),
        "limit": limit,
        "prune": pruning,
        "seed": seed,
        "prune_min": prune_min,
        **where_params,
    }
    arrays = _ARRAYS if limit is None else _NO_ARRAYS
    top = _WALK if where_params else _TOP
    middle = _PRUNED if pruning else _EXHAUSTIVE
    text = (_HEAD + middle + _TAIL).format(bound=_BOUND, contrib=_CONTRIB, arrays=arrays, top=top, where="{where}")
    return sql.SQL(text).format(where=where), args


@dataclass(frozen=True, slots=True)
class Candidate:
    chunk_id: str
    row: int
    score: float


def rescore(
    rows: Sequence[Sequence[Any]],
    exact: Sequence[str],
    stems: Sequence[str],
    *,
    limit: int | None,
    params: BM25Params,
) -> list[tuple[str, float]]:
    """The exact BM25 top ``limit`` of :func:`lexical_query`'s rows, best first, ties by
    row id: the embedded store's values (same idf function, same expression, terms added
    in query order starting from 0.0)."""
    if not rows:
        return []
    keys, fields = lexical_keys(exact, stems, params)
    first = rows[0]
    n_chunks = int(first[6])
    df = {keys[int(i) - 1]: int(d) for i, d in zip(first[9] or [], first[10] or [], strict=True)}
    stats = TermStats(n_chunks, (int(first[7]), int(first[8])), df)
    present, idfs, avgdl = term_weights(keys, fields, stats, params)
    position = {key: j for j, key in enumerate(keys)}
    weight_of = {position[key]: (idf_value, mean) for key, idf_value, mean in zip(present, idfs, avgdl, strict=True)}
    k1, b = params.k1, params.b
    scored: list[Candidate] = []
    for chunk_id, row, len_exact, len_stems, ii, tt, *_ in rows:
        lengths = (len_exact, len_stems)
        total = 0.0
        for i, tf in sorted(zip(ii, tt, strict=True)):
            j = int(i) - 1
            term_idf, mean = weight_of[j]
            doc_len = lengths[fields[j]]
            norm = k1 * (1.0 - b + b * doc_len / mean)
            total += term_idf * tf * (k1 + 1.0) / (tf + norm)
        scored.append(Candidate(chunk_id, int(row), total))
    scored.sort(key=lambda c: (-c.score, c.row))
    if limit is not None:
        scored = scored[:limit]
    return [(c.chunk_id, c.score) for c in scored]
