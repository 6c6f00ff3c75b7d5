"""R-MAT straight to a chunked graph, without ever holding the whole graph.

:func:`rmat_chunked` writes the graph :func:`partplan.datasets.generators.rmat`
returns for the same arguments — the same CSR arrays, name and flags, hence the
same :attr:`Graph.fingerprint` — as a chunked graph directory
(:mod:`partplan.io.chunked`), holding at any time O(n) state (the vertex
label permutation, 8 bytes per vertex) plus one block of tuples plus one
chunk's edges:

1. the tuples are drawn block by block exactly as :func:`rmat_edges` draws
   them (PCG64 stream ``SeedSequence([seed, block])`` per block of
   :data:`RMAT_CHUNK` tuples, labels permuted by the permutation drawn from
   ``SeedSequence([seed, nblocks, 1])``);
2. each tuple ``(u, v)`` — and ``(v, u)`` when symmetrizing — is appended to
   the bucket file of the row chunk of its row, as one int64 key ``row·n + col``;
3. per chunk: read its bucket, drop (or add) self loops, ``np.unique`` the keys
   (sorted = CSR order, duplicates removed), write the chunk.

Disk: about 8 bytes × 2M (symmetrized) of scratch in the temporary directory,
removed at the end. Scale ≤ 31 (the key ``row·n + col`` must fit in int64).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..io.chunked import MAX_CHUNKS, ChunkedWriter
from .generators import RMAT_CHUNK, GeneratorParameterError, _check_int, _check_size, _rmat_probs, rmat_name


def _rmat_block(blk: int, m: int, scale: int, seed: int, thresholds) -> tuple[np.ndarray, np.ndarray]:
    """Tuples ``[blk·RMAT_CHUNK, ...)`` of the Graph500 stream, before the label
    permutation: the same arithmetic as :func:`partplan.datasets.generators.rmat_edges`
    (tests/unit/io/test_chunked.py checks the graphs are equal)."""
    t_ab, t_c, t_a = thresholds
    low, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    lo, hi = blk * RMAT_CHUNK, min(m, (blk + 1) * RMAT_CHUNK)
    bitgen = np.random.PCG64(np.random.SeedSequence([seed, blk]))
    s = np.zeros(hi - lo, dtype=np.int64)
    t = np.zeros(hi - lo, dtype=np.int64)
    for level in range(scale):
        r = bitgen.random_raw(hi - lo)
        ii = (r & low) > t_ab
        jj = (r >> shift) > np.where(ii, t_c, t_a)
        s |= ii.astype(np.int64) << level
        t |= jj.astype(np.int64) << level
    return s, t


def rmat_chunked(scale: int, edgefactor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19,
                 seed: int = 0, *, path, chunks: int = 8, permute: bool = True, symmetrize: bool = True,
                 self_loops: str = "remove", name: str | None = None) -> Path:
    """Write the R-MAT graph ``rmat(scale, edgefactor, a, b, c, seed, permute=...,
    symmetrize=..., self_loops=...)`` as a chunked graph at ``path`` with
    ``chunks`` row chunks of equal row counts (``n·c/chunks`` boundaries).

    Memory: O(n) (8 bytes per vertex) + O(RMAT_CHUNK) + one chunk's edges
    (≈ 16 bytes × 2M / chunks when symmetrized); never O(M) at once.
    ``drop_isolated`` is not offered (it relabels globally). Returns the path.
    Raises GeneratorParameterError on bad parameters (before any work).
    """
    scale = _check_int("scale", scale, 1, 31)
    edgefactor = _check_int("edgefactor", edgefactor, 1)
    seed = _check_int("seed", seed, 0)
    chunks = _check_int("chunks", chunks, 1, min(MAX_CHUNKS, 1 << scale))    # no chunk without a row
    a, b, c = _rmat_probs(a, b, c)
    if self_loops not in ("keep", "add", "remove"):
        raise GeneratorParameterError(f"self_loops must be 'keep', 'add' or 'remove', not {self_loops!r}")
    n = 1 << scale
    m = edgefactor * n
    # what is held at once (the docstring's memory), 8 bytes each: the permutation, one block of
    # tuples as it is permuted, symmetrized, keyed and split by chunk (about 16 arrays of RMAT_CHUNK:
    # 140 MiB measured at scale 20, 64 chunks), and one chunk's keys, three copies while it is sorted
    per_chunk = -(-(2 if symmetrize else 1) * m // chunks)
    _check_size("scale / edgefactor / chunks", "chunked R-MAT permutation, one block and one chunk's edges",
                n + 16 * min(RMAT_CHUNK, m) + 3 * per_chunk, 8)
    ab = a + b
    thresholds = tuple(np.uint64(min(int(q * 2.0 ** 32), 2 ** 32 - 1)) for q in (ab, c / (1.0 - ab), a / ab))
    nblocks = -(-m // RMAT_CHUNK)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, nblocks, 1])))
    perm = rng.permutation(n).astype(np.int64) if permute else None
    bounds = (np.arange(chunks + 1, dtype=np.int64) * n) // chunks
    name = name or rmat_name(scale, edgefactor, a, b, c, seed, permute=permute)
    nn = np.int64(n)
    with ChunkedWriter(path, n, weighted=False, directed=not symmetrize, name=name) as w:
        buckets = [w.tmp / f".bucket-{i:05d}.bin" for i in range(chunks)]
        for f in buckets:
            f.touch()
        for blk in range(nblocks):           # loop over blocks of tuples (2**20 each), not tuples
            s, t = _rmat_block(blk, m, scale, seed, thresholds)
            if perm is not None:
                s, t = perm[s], perm[t]
            if symmetrize:
                s, t = np.concatenate([s, t]), np.concatenate([t, s])
            key = s * nn + t
            cid = np.searchsorted(bounds[1:], s, side="right")
            order = np.argsort(cid, kind="stable")
            key, cb = key[order], np.searchsorted(cid[order], np.arange(chunks + 1))
            del s, t, cid, order
            for i in range(chunks):          # loop over chunks
                if cb[i + 1] > cb[i]:
                    with open(buckets[i], "ab") as fh:
                        key[cb[i]:cb[i + 1]].tofile(fh)
        del perm
        for i in range(chunks):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            key = np.fromfile(buckets[i], dtype=np.int64)
            os.unlink(buckets[i])
            if self_loops == "remove":
                key = key[key % (nn + 1) != 0]          # row == col  <=>  key = row·(n + 1)
            elif self_loops == "add":
                key = np.concatenate([key, np.arange(lo, hi, dtype=np.int64) * (nn + 1)])
            key = np.unique(key)                          # sorted: CSR order; duplicates gone
            rows = key // nn
            indptr = np.zeros(hi - lo + 1, dtype=np.int64)
            np.cumsum(np.bincount(rows - lo, minlength=hi - lo), out=indptr[1:])
            w.add(indptr, key - rows * nn)
            del key, rows
        return w.commit()


__all__ = ["rmat_chunked"]
