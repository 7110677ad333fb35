"""The Milvus layout of a plait collection: schemas, token encoding, filter expressions.

Two Milvus collections per store namespace ``prefix``:

* ``{prefix}_meta`` — one entity per plait collection (key ``c/{name}``: embedder,
  settings, scopes last indexed, the commit counter and the chunk layout) and one per
  source (key ``s/{collection id}/{source id}``: scope, root, indexed at, counts). A
  dummy 2-d vector field is there only because Milvus requires one.
* ``{prefix}_{collection id}_d{dim}`` — one entity per chunk version holding both
  arms: the dense vector (HNSW, cosine) and two BM25 sparse fields that Milvus computes
  itself (``Function(FunctionType.BM25)``) from two text fields holding plait's analysed
  tokens — the identifier-preserving ``exact`` field and the ``stems`` field.

Tokens are written with :func:`encode_token`, which maps every character outside
``[a-z0-9]`` to ``_<hex>_``: the result is one "word" for any word tokenizer (Milvus's
``standard``, milvus-lite's ``\\w+``), so ``err-4012`` stays whole on every Milvus
engine. (milvus-lite 3.2 has no ``whitespace`` tokenizer; Milvus server has one, but
the same encoding under the default analyzer works on both — one code path.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from plait.errors import ConfigError, StoreError
from plait.stores.base import Filters

__all__ = [
    "ANALYZER",
    "CHUNK_FIELDS",
    "LEXICAL_FIELDS",
    "MAX_TEXT",
    "check_text",
    "chunk_index_params",
    "chunk_schema",
    "encode_token",
    "encode_tokens",
    "filter_expr",
    "in_expr",
    "json_body",
    "literal",
    "meta_schema",
]

ANALYZER: dict[str, Any] = {"tokenizer": "standard"}
"""The analyzer of the two token fields; the tokens it sees are already encoded."""

LEXICAL_FIELDS = {"exact": ("exact_text", "exact_sparse"), "stems": ("stems_text", "stems_sparse")}
"""plait's lexical field → (Milvus text field, Milvus BM25 sparse field)."""

CHUNK_FIELDS = [
    "pk",
    "chunk_id",
    "source_id",
    "scope",
    "ordinal",
    "content",
    "content_hash",
    "origin",
    "metadata",
    "born",
    "died",
    "has_vector",
    "vector",
    "exact_text",
    "stems_text",
]
"""Every field a chunk entity is written with (the sparse fields are generated)."""

MAX_TEXT = 65535
"""Milvus's VARCHAR limit, in bytes."""

_PLAIN = re.compile(r"[a-z0-9]")


def encode_token(token: str) -> str:
    """One analysed token as a single word-character run that no analyzer splits.

    ``[a-z0-9]`` stay as they are; every other character becomes ``_<hex code>_``, so
    the encoding is injective (``_`` itself is escaped) and readable:
    ``err-4012`` → ``err_2d_4012``, ``v3.11.2`` → ``v3_2e_11_2e_2``.
    """
    return "".join(ch if _PLAIN.fullmatch(ch) else f"_{ord(ch):x}_" for ch in token)


def encode_tokens(tokens: Iterable[str]) -> str:
    """Tokens, encoded and joined by spaces: the text a BM25 field is computed from."""
    return " ".join(encode_token(t) for t in tokens)


def literal(value: Any) -> str:
    """A Milvus expression literal for a str, bool, int or float (strings JSON-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise ConfigError(
        f"cannot filter on {value!r} ({type(value).__name__}) in Milvus: "
        "use a string, number or boolean"
    )


def in_expr(field: str, values: Sequence[Any]) -> str:
    """``field in [v1, v2, …]`` with every value rendered by :func:`literal`."""
    return f"{field} in [{', '.join(literal(v) for v in values)}]"


def filter_expr(filters: Filters | None) -> str:
    """The Milvus expression for plait's scope / metadata filters ("" when none)."""
    if filters is None or filters.empty:
        return ""
    parts: list[str] = []
    if filters.scopes:
        parts.append(in_expr("scope", list(filters.scopes)))
    for key, value in filters.metadata.items():
        parts.append(f"metadata[{literal(str(key))}] == {literal(value)}")
    return " and ".join(parts)


def meta_schema() -> Any:
    """Schema of the metadata collection."""
    from pymilvus import DataType, MilvusClient  # type: ignore[import-untyped]

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=8192)
    schema.add_field("kind", DataType.VARCHAR, max_length=16)
    schema.add_field("coll", DataType.VARCHAR, max_length=512)
    schema.add_field("body", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field("dummy", DataType.FLOAT_VECTOR, dim=2)
    return schema


def chunk_schema(dim: int) -> Any:
    """Schema of a chunk collection whose dense vectors have ``dim`` dimensions."""
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=8192)
    schema.add_field("chunk_id", DataType.VARCHAR, max_length=8192)
    schema.add_field("source_id", DataType.VARCHAR, max_length=8192)
    schema.add_field("scope", DataType.VARCHAR, max_length=512)
    schema.add_field("ordinal", DataType.INT64)
    schema.add_field("content", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field("content_hash", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field("origin", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("born", DataType.INT64)
    schema.add_field("died", DataType.INT64)
    schema.add_field("has_vector", DataType.BOOL)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    for name, (text, sparse) in LEXICAL_FIELDS.items():
        schema.add_field(
            text, DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True, analyzer_params=ANALYZER
        )
        schema.add_field(sparse, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(
            Function(
                name=f"bm25_{name}",
                function_type=FunctionType.BM25,
                input_field_names=[text],
                output_field_names=[sparse],
            )
        )
    return schema


def chunk_index_params(client: Any, *, k1: float, b: float) -> Any:
    """HNSW/cosine on the dense field; BM25 inverted indexes (k1, b) on both sparse fields;
    scalar inverted indexes on the ids every write and read filters by.

    Build parameters are sent twice: flat (how pymilvus 3 sends them and Milvus server
    reads them) and as one JSON ``params`` entry (the only form milvus-lite 3.2 reads —
    it silently drops flat ones and would build BM25 with k1=1.5, b=0.75).
    """
    params = client.prepare_index_params()

    def both(build: dict[str, Any]) -> dict[str, Any]:
        return {**build, "params": dict(build)}

    params.add_index(
        field_name="vector",
        index_type="HNSW",
        metric_type="COSINE",
        params=both({"M": 16, "efConstruction": 200}),
    )
    for scalar in ("chunk_id", "source_id", "content_hash"):
        params.add_index(field_name=scalar, index_type="INVERTED")
    for _, sparse in LEXICAL_FIELDS.values():
        params.add_index(
            field_name=sparse,
            index_type="SPARSE_INVERTED_INDEX",
            metric_type="BM25",
            params=both({"bm25_k1": k1, "bm25_b": b}),
        )
    return params


def check_text(value: str, what: str) -> str:
    """Refuse text longer than a Milvus VARCHAR holds, naming what it was."""
    size = len(value.encode("utf-8"))
    if size > MAX_TEXT:
        raise StoreError(f"{what} is {size} bytes; a Milvus VARCHAR holds at most {MAX_TEXT}")
    return value


def json_body(data: Mapping[str, Any]) -> str:
    """A metadata entity's body, checked against the VARCHAR limit."""
    return check_text(json.dumps(data, sort_keys=True, ensure_ascii=False), "collection metadata")
