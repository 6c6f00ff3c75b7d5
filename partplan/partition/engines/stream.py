"""Streaming partitioner: a partition of a graph that does
not fit in memory, computed in passes over its row blocks with O(n + k) state.

:func:`stream_partition` reads the graph one block of rows at a time — a
chunked graph directory (:mod:`partplan.io.chunked`, via
:func:`~partplan.io.chunked.read_chunk_rows`, which reads only the bytes of
those rows) or an in-memory :class:`~partplan.Graph` (row slices) — and
places every vertex of the block, in a deterministic order, with one of two
greedy one-pass rules:

* **Fennel** (Tsourakakis, Gkantsidis, Radunovic, Vojnovic, WSDM 2014):
  v → argmax_i |N(v) ∩ P_i| − α·γ·w(v)·L_i^(γ−1), γ = 1.5,
  α = m·k^(γ−1) / W^γ (= √k·m / n^1.5 for unit weights), L_i the weight
  already in part i, W the total weight, m the undirected edges (nnz / 2);
* **LDG** (Stanton & Kliot, KDD 2012): v → argmax_i |N(v) ∩ P_i|·(1 − L_i / C).

Both under a **hard cap** C = ⌊(1+ε)·⌈W/k⌉⌋ on every part's weight: parts
without room are not candidates. Weights (``balance``): "nnz" (default; the
planner's balance weights: row nnz, at least 1 per row — the compute load that METIS's
vertex weights and :func:`partplan.partition.refinement.refine` balance — or the graph's
own vertex weights, at least 1, when it has them) or "vertices" (1 per row; the cap
is then ⌊(1+ε)·⌈n/k⌉⌋ and always feasible). With "nnz" a vertex heavier than
every part's room (a hub of degree > ε·W/k, late in the pass) goes to the
lightest part, which then exceeds C by less than its weight; such placements
are counted (``stats["overflow"]``) and, as for METIS, the bound is then
max part weight ≤ W/k + max w.

Ties go to the lighter part, then the lower part id. A vertex with no placed
neighbour goes to the lightest part (both rules). Self loops are ignored;
rows give the neighbours (a directed graph is partitioned by out-neighbours:
symmetrize it first for the column-net volume).

**Restreaming** (``passes > 1``; ReFennel / ReLDG, Nishimura & Ugander,
KDD 2013): later passes take each vertex out of its part and place it again
with every neighbour's current part known.

**Order.** Blocks of ``block_rows`` rows in row order; inside a block the
rows in natural order (``order="natural"``) or in the permutation drawn from
``SeedSequence([seed, block])`` (``order="random"``). Blocks do not depend on
how the graph is stored, so a chunked graph and the same graph in memory
give the same partition, and the same input + options + seed give the same
partition.

**Memory.** int32[n] part ids, int64[k] part loads, a k-leaf min tree (the
lightest part in O(log k)), int64[k] neighbour counts, and one block's rows
(O(block_rows + its nnz)); for a chunked graph with balance="nnz" a first
pass reads the indptr files only (W, the empty rows). Each vertex costs
O(deg + log k): only the parts of its neighbours and the lightest part are
candidates (every other part scores below the lightest one).

The placement loop is a numba kernel (cached like every partplan kernel;
without numba it runs as Python: correct, slow). Peak RSS (VmHWM, of the
whole process) after each pass goes to ``stats`` and ``progress``.

The result can be refined where the graph fits in memory, e.g. with
:func:`partplan.partition.refinement.refine.refine` (bottleneck) or its "total"
objective (km1).
"""
from __future__ import annotations

import math
import numbers
import os
import time
from dataclasses import dataclass

import numpy as np

from ..._kernels import HAVE_NUMBA, njit  # numba with the user's cache directory (or plain Python)
from ...errors import BackendUnavailableError, GraphFormatError, OptionError, PartitionError
from ...graph import Graph
from ..context import engine, option
from ..options import DEFAULT_IMBALANCE, check_int, check_real, rng_seed


METHODS = ("fennel", "ldg")
BALANCES = ("nnz", "vertices")
ORDERS = ("natural", "random")
GAMMA = 1.5
DEFAULT_BLOCK_ROWS = 1 << 16
DEFAULT_PASSES = 3   # ReFennel: two restreams after the first pass (measured on R-MAT, docs/design/distributed.md)
_BIG = np.iinfo(np.int64).max


# ----------------------------------------------------------------------------- kernel
@njit
def _tree_update(tree, loads, size, i):
    """Leaf i of the min tree changed: recompute its ancestors (ties: lower id)."""
    j = (i + size) >> 1
    while j >= 1:
        a = tree[2 * j]
        b = tree[2 * j + 1]
        if b >= 0 and (a < 0 or loads[b] < loads[a]):
            tree[j] = b
        else:
            tree[j] = a
        j >>= 1


@njit
def _place_block(indptr, indices, order, lo, wts, part, loads, tree, size, cnt, touched,
                 method, alpha_g, cap, restream):
    """Place the rows ``order`` (local ids) of one block; ``part`` / ``loads``
    / ``tree`` updated in place. Returns (overflow, moved)."""
    overflow = 0
    moved = 0
    for t in range(order.size):
        r = order[t]
        v = lo + r
        wv = wts[r]
        old = -1
        if restream:
            old = part[v]
            if old >= 0:
                loads[old] -= wv
                _tree_update(tree, loads, size, old)
        nt = 0
        for e in range(indptr[r], indptr[r + 1]):
            u = indices[e]
            if u == v:
                continue
            p = part[u]
            if p < 0:
                continue
            if cnt[p] == 0:
                touched[nt] = p
                nt += 1
            cnt[p] += 1
        # the lightest part: best of all parts without placed neighbours
        best = tree[1]
        lb = loads[best]
        if lb + wv > cap:        # no part has room: the lightest takes it
            overflow += 1
            for q in range(nt):
                cnt[touched[q]] = 0
        else:
            if method == 0:
                bs = -alpha_g * wv * math.sqrt(lb) if cnt[best] == 0 else 0.0
            else:
                bs = 0.0
            if cnt[best] != 0:   # scored below with its neighbours
                best = -1
                bs = -np.inf
            for q in range(nt):
                p = touched[q]
                c = cnt[p]
                cnt[p] = 0
                lp = loads[p]
                if lp + wv > cap:
                    continue
                if method == 0:
                    s = c - alpha_g * wv * math.sqrt(lp)
                else:
                    s = c * (1.0 - lp / cap)
                if best < 0 or s > bs or (s == bs and (lp < loads[best] or (lp == loads[best] and p < best))):
                    best = p
                    bs = s
            if best < 0:         # every neighbour part is full: the lightest part
                best = tree[1]
        part[v] = best
        loads[best] += wv
        _tree_update(tree, loads, size, best)
        if restream and old != best:
            moved += 1
    return overflow, moved


# ----------------------------------------------------------------------------- sources
class _MemSource:
    def __init__(self, g: Graph):
        self.g, self.n, self.nnz = g, g.n, g.nnz

    def vertex_weights(self):
        """The graph's vertex weights (int64[n]), or None."""
        return self.g.vertex_weights

    def rows(self, lo, hi):
        a, b = int(self.g.indptr[lo]), int(self.g.indptr[hi])
        return (self.g.indptr[lo:hi + 1] - a).astype(np.int64, copy=False), \
            self.g.indices[a:b].astype(np.int64, copy=False)

    def empty_rows(self):
        return int(np.count_nonzero(np.diff(self.g.indptr) == 0))

    def degrees(self):
        """int64[n]: nonzeros per row."""
        return np.diff(self.g.indptr).astype(np.int64)


class _ChunkSource:
    def vertex_weights(self):
        """None: a chunked graph carries no vertex weights."""
        return None

    def __init__(self, path):
        from ...io.chunked import chunk_info
        self.path = path
        self.info = chunk_info(path)
        self.n, self.nnz = self.info.n, self.info.nnz

    def rows(self, lo, hi):
        from ...io.chunked import read_chunk_rows
        r = read_chunk_rows(self.path, lo, hi, info=self.info)
        return r.indptr, r.indices

    def _degree_blocks(self):
        """Nonzeros per row, block by block (about 2**20 rows), from the indptr files only."""
        from ...io.chunked import _npy_slice
        step = 1 << 20
        for c in self.info.chunks:
            rows = c.row_hi - c.row_lo
            prev = None
            for s in range(0, rows + 1, step):
                blk = _npy_slice(c.indptr, np.dtype("<i8"), rows + 1, s, min(step, rows + 1 - s), "indptr")
                if prev is not None:
                    blk = np.concatenate(([prev], blk))
                yield np.diff(blk)
                prev = blk[-1]

    def degrees(self):
        """int64[n]: nonzeros per row, from the indptr files only (blockwise)."""
        out = list(self._degree_blocks())
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)

    def empty_rows(self):
        """Rows without nonzeros, from the indptr files only (blockwise)."""
        return sum(int(np.count_nonzero(d == 0)) for d in self._degree_blocks())


def _source(path_or_graph):
    if isinstance(path_or_graph, Graph):
        return _MemSource(path_or_graph)
    if isinstance(path_or_graph, (str, os.PathLike)):
        from ...io.chunked import is_chunked
        if is_chunked(path_or_graph):
            return _ChunkSource(path_or_graph)
        from ...io import read_graph      # a graph file: it has to fit in memory anyway
        return _MemSource(read_graph(path_or_graph))
    raise PartitionError(f"path_or_graph must be a Graph or the path of a (chunked) graph, "
                         f"got {type(path_or_graph).__name__}")


# ----------------------------------------------------------------------------- API
def stream_partition(path_or_graph, k, *, eps=DEFAULT_IMBALANCE, method="fennel", passes=DEFAULT_PASSES, seed=0,
                     progress=None, balance="nnz", order="natural", block_rows=DEFAULT_BLOCK_ROWS,
                     stats: dict | None = None) -> np.ndarray:
    """Streaming k-way partition (Fennel / LDG, optional restreaming) of a
    chunked graph directory or an in-memory graph, in O(n + k) state plus one
    block of rows. See the module docstring for the model.

    Parameters
    ----------
    path_or_graph : a :class:`Graph`, a chunked graph directory, or a graph
        file (read whole).
    k : parts, 1 ≤ k ≤ n.
    eps : balance tolerance ε ≥ 0 (finite): cap = ⌊(1+ε)·⌈W/k⌉⌋.
    method : "fennel" or "ldg".
    passes : ≥ 1; passes after the first restream (ReFennel / ReLDG).
    seed : seeds the in-block order when ``order="random"``.
    progress : callable(str) or None: one line per pass (wall, peak RSS).
    balance : "nnz" (row nnz, at least 1; a graph's vertex weights when it has them) or "vertices".
    order : "natural" or "random" (seeded permutation inside each block).
    block_rows : rows per block (memory: one block's rows); the result
        depends on it only with ``order="random"``.
    stats : a dict to fill (or None): ``cap``, ``total_weight``,
        ``max_load``, ``overflow``, ``alpha``, ``passes`` (per pass: wall_s,
        moved, peak_rss_bytes), ``peak_rss_bytes`` (VmHWM of the process at
        the end), ``rss_start_bytes`` (VmRSS before), ``compiled``.

    Returns int64[n] part ids in [0, k).

    Raises PartitionError (k, eps, path_or_graph), OptionError (method,
    passes, seed, balance, order, block_rows) — one, naming the field, before
    any pass — and GraphFormatError for a malformed chunked graph.
    """
    from ..._process import current_rss_bytes, peak_rss_bytes

    if not isinstance(method, str) or method not in METHODS:
        raise OptionError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(balance, str) or balance not in BALANCES:
        raise OptionError(f"balance must be one of {', '.join(BALANCES)}, got {balance!r}")
    if not isinstance(order, str) or order not in ORDERS:
        raise OptionError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    eps = check_real("eps", eps, lo=0.0, hi=10.0, hi_open=True, error=PartitionError)
    passes = check_int("passes", passes, lo=1, hi=1000)
    seed = rng_seed(seed)
    block_rows = check_int("block_rows", block_rows, lo=1, hi=1 << 40)
    if progress is not None and not callable(progress):
        raise OptionError(f"progress must be callable or None, got {type(progress).__name__}")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise PartitionError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k < 1:
        raise PartitionError(f"k must be >= 1, got {k}")
    src = _source(path_or_graph)
    n = src.n
    if k > n:
        raise PartitionError(f"k={k} parts exceed n={n} vertices")

    rss0 = current_rss_bytes()
    # "nnz": the planner's balance weights — the graph's vertex weights (at least 1) when it has them
    vw = src.vertex_weights() if balance == "nnz" else None
    vw = None if vw is None else np.maximum(vw, 1).astype(np.int64)
    W = n if balance == "vertices" else int(vw.sum()) if vw is not None else src.nnz + src.empty_rows()
    cap = int(math.floor((1.0 + eps) * (-(-W // k)) + 1e-9))
    m = src.nnz / 2.0
    alpha = m * k ** (GAMMA - 1.0) / float(W) ** GAMMA if W > 0 else 0.0
    alpha_g = alpha * GAMMA
    mcode = METHODS.index(method)

    part = np.full(n, -1, dtype=np.int32)
    loads = np.zeros(k, dtype=np.int64)
    size = 1
    while size < k:
        size *= 2
    tree = np.full(2 * size, -1, dtype=np.int64)
    tree[size:size + k] = np.arange(k)
    for j in range(size - 1, 0, -1):          # lowest id among equal (zero) loads
        a, b = tree[2 * j], tree[2 * j + 1]
        tree[j] = a if a >= 0 else b
    cnt = np.zeros(k, dtype=np.int64)
    touched = np.empty(k, dtype=np.int64)

    per_pass = []
    overflow = 0
    for ps in range(passes):
        t0 = time.perf_counter()
        moved = 0
        overflow = 0
        for bi, lo in enumerate(range(0, n, block_rows)):
            hi = min(n, lo + block_rows)
            ip, idx = src.rows(lo, hi)
            if order == "random":
                od = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, bi]))) \
                    .permutation(hi - lo).astype(np.int64)
            else:
                od = np.arange(hi - lo, dtype=np.int64)
            if vw is not None:
                wts = vw[lo:hi]
            elif balance == "nnz":
                wts = np.maximum(np.diff(ip), 1).astype(np.int64)
            else:
                wts = np.ones(hi - lo, dtype=np.int64)
            of, mv = _place_block(ip, idx, od, lo, wts, part, loads, tree, size, cnt, touched,
                                  mcode, alpha_g, cap, ps > 0)
            overflow += int(of)
            moved += int(mv)
            del ip, idx, od, wts
        rec = {"pass": ps + 1, "wall_s": time.perf_counter() - t0, "moved": moved if ps else n,
               "overflow": overflow, "max_load": int(loads.max()), "peak_rss_bytes": peak_rss_bytes()}
        per_pass.append(rec)
        if progress is not None:
            progress(f"stream {method} pass {ps + 1}/{passes}: {rec['wall_s']:.2f} s, moved {rec['moved']}, "
                     f"max load {rec['max_load']} (cap {cap}), peak RSS {rec['peak_rss_bytes'] / 2**20:.0f} MiB")
        if ps > 0 and moved == 0:
            break
    if stats is not None:
        stats.update({"method": method, "balance": balance, "order": order, "k": k, "n": n, "cap": cap,
                      "total_weight": int(W), "alpha": alpha, "max_load": int(loads.max()),
                      "overflow": overflow, "passes": per_pass, "peak_rss_bytes": peak_rss_bytes(),
                      "rss_start_bytes": rss0, "compiled": HAVE_NUMBA})
    return part.astype(np.int64)


__all__ = ["stream_partition", "METHODS", "BALANCES", "ORDERS"]


@dataclass(frozen=True)
class StreamContext:
    """The streaming partitioner (Fennel / LDG, this module)."""

    method: str = option("fennel", "one-pass rule: Fennel or LDG", choices=METHODS)
    passes: int = option(DEFAULT_PASSES, "passes over the rows; > 1 restreams (ReFennel / ReLDG)", unit="passes",
                         lo=1, hi=1000)
    balance: str = option("nnz", "part weights: row nnz (at least 1) or 1 per row", choices=BALANCES)
    order: str = option("natural", "vertex order inside a block (random: seeded)", choices=ORDERS)
    block_rows: int = option(DEFAULT_BLOCK_ROWS, "rows per streamed block (memory)", unit="rows", lo=1,
                             hi=1 << 40)



def _run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    """The streaming partitioner (Fennel / LDG) on the graph model; info = its stats."""
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("stream partitions graphs only (model='graph')")
    stats: dict = {}
    part = stream_partition(model_obj, k, eps=imbalance, seed=seed, stats=stats, **opts)
    return np.asarray(part, dtype=np.int64), stats



def _mpi_run(comm, rows, n: int, k: int, *, imbalance: float, seed: int, symmetric: bool, graph_path: str,
             **opts):
    """The registry's ``mpi_run``: the same streaming partitioner, in process 0 over the chunked
    graph (O(n + k) state plus one block of rows), broadcast to every process as int32[n];
    each keeps its rows."""
    full = None
    if comm.Get_rank() == 0:
        full = np.asarray(stream_partition(graph_path, k, eps=imbalance, seed=seed, **opts), dtype=np.int32)
    full = comm.bcast(full, root=0)
    return full[rows.lo:rows.hi]


def _missing() -> list:
    from . import mpilibs
    return mpilibs.missing("stream")


engine("stream", ("graph",), _run, StreamContext, mpi_run=_mpi_run, mpi_missing=_missing)
