"""KaMinPar (PyPI ``kaminpar``, 3.7.x): a shared-memory multilevel graph
partitioner (edge cut), faster and leaner than METIS. Graph model only.

Hand-off: the 3.7 Python API has no in-memory constructor (``kaminpar.Graph``
has "No constructor defined"; only ``load_graph(path, GraphFileFormat)``), so
the symmetrized graph of :func:`partplan.models.metis_graph` (vertex weight =
row nnz, at least 1; edge weights = multiplicity) is written into a unique
temporary directory, loaded, and the directory removed. The file is ParHIP
binary (:func:`write_parhip`: a 24-byte header, then the arrays as they are,
64-bit; ``handoff="parhip"``, the default) — written by ``ndarray.tofile`` in
milliseconds, where the METIS text (:func:`metis_text`, ``handoff="metis"``)
took 0.4–0.9 s on 0.4–0.7 M nonzeros, as long as KaMinPar's own run. Both
give KaMinPar the same graph: the same partition for the same seed (tested).

Contexts (``context=``): :data:`CONTEXTS` — "default", "fast", "eco",
"strong", "largek" (+ "-fast"/"-eco"/"-strong"), "terapart" (memory-efficient:
compressed graph), "terapart-eco", "terapart-largek". Terapart contexts load
the graph compressed (``load_graph(..., compress=True)``).

Determinism: ``kaminpar.reseed(seed)`` before every call; with one thread the
partition is the same for the same input and seed (tested); with several
threads KaMinPar's label propagation is not guaranteed bit-reproducible.

Errors: k > n, a bad context name, a bad thread count or ε are one
:class:`~partplan.errors.PartitionError` / ``BackendUnavailableError`` before
the engine runs; anything the engine raises becomes a PartitionError.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..._atomic import scratch_dir
from ...errors import BackendUnavailableError, OptionError, PartitionError
from ...graph import Graph
from ...models import metis_graph
from .handoff import _join_lines
from ..context import engine, option
from ..options import DEFAULT_IMBALANCE, MAX_THREADS, check_imbalance, check_int, check_seed

CONTEXTS = ("default", "fast", "eco", "strong", "largek", "largek-fast", "largek-eco", "largek-strong",
            "terapart", "terapart-eco", "terapart-largek")


def check_context(context) -> str:
    """A KaMinPar context name (case-insensitive, ``_`` = ``-``), else BackendUnavailableError."""
    c = str(context).lower().replace("_", "-") if isinstance(context, str) else None
    if c not in CONTEXTS:
        raise BackendUnavailableError(f"unknown KaMinPar context {context!r}; choose one of {', '.join(CONTEXTS)}")
    return c


def _module():
    try:
        import kaminpar
    except ImportError as exc:
        raise BackendUnavailableError("kaminpar is not installed (pip install 'kaminpar>=3.7,<4')") from exc
    return kaminpar


def metis_text(xadj: np.ndarray, adjncy: np.ndarray, ew: np.ndarray, vw: np.ndarray) -> str:
    """METIS graph text, fmt 011 (vertex weight, then neighbour/edge-weight pairs, 1-based)."""
    n = int(xadj.size - 1)
    deg = np.diff(xadj)
    line_ptr = np.concatenate([[0], np.cumsum(1 + 2 * deg)]).astype(np.int64)
    vals = np.empty(int(line_ptr[-1]), dtype=np.int64)
    vals[line_ptr[:-1]] = vw
    body = np.ones(vals.size, dtype=bool)
    body[line_ptr[:-1]] = False
    pairs = np.empty(2 * adjncy.size, dtype=np.int64)
    pairs[0::2] = adjncy + 1
    pairs[1::2] = ew
    vals[body] = pairs
    return f"{n} {adjncy.size // 2} 011\n" + _join_lines(vals, line_ptr)


PARHIP_VERSION = 0  # bit field LSB→MSB [!ewgt, !vwgt, 32-bit eid, 32-bit vid, 32-bit vwgt, 32-bit ewgt]: all 64-bit, both weights
HANDOFFS = ("parhip", "metis")


def write_parhip(path, xadj: np.ndarray, adjncy: np.ndarray, ew: np.ndarray, vw: np.ndarray) -> None:
    """ParHIP binary graph file (KaMinPar's / KaGen's extension with weights): header
    (version, n, m = directed edges; u64), offsets[n+1] (byte address of each vertex's first
    neighbour from the start of the file; u64), neighbours[m] (u64), vertex weights[n] (i64),
    edge weights[m] (i64)."""
    n, m = int(xadj.size - 1), int(adjncy.size)
    off = np.asarray(xadj, dtype=np.uint64) * np.uint64(8) + np.uint64(24 + 8 * (n + 1))
    with open(path, "wb") as fh:
        for a in (np.array([PARHIP_VERSION, n, m], dtype=np.uint64), off, np.asarray(adjncy, dtype=np.uint64),
                  np.asarray(vw, dtype=np.int64), np.asarray(ew, dtype=np.int64)):
            a.tofile(fh)


LEAN_CHUNK = 1 << 22  # nonzeros per chunk of the streaming writer


def write_parhip_lean(path, graph: Graph, vw: np.ndarray) -> bool:
    """Stream the ParHIP file of a symmetric graph with sorted, duplicate-free rows straight from
    its CSR arrays, in chunks of LEAN_CHUNK nonzeros — the same bytes as :func:`write_parhip` of
    :func:`partplan.models.metis_graph` (diagonal dropped; every edge weight 2 = its entries in
    A + Aᵀ) without the symmetrized copy (on R-MAT 20, 31 M nonzeros, that copy took the
    process from 0.68 to 2.0 GiB). Extra memory O(n + chunk). False (nothing written) for
    other graphs."""
    from ..rows import is_canonical

    n = graph.n
    ptr, idx = np.asarray(graph.indptr, dtype=np.int64), np.asarray(graph.indices, dtype=np.int64)
    if not graph.is_symmetric() or not is_canonical(n, ptr, idx):
        return False
    bounds = [0]
    while bounds[-1] < n:   # row chunks of about LEAN_CHUNK nonzeros
        nxt = int(np.searchsorted(ptr, ptr[bounds[-1]] + LEAN_CHUNK, side="right")) - 1
        bounds.append(min(n, max(nxt, bounds[-1] + 1)))
    deg = np.diff(ptr)
    for r0, r1 in zip(bounds[:-1], bounds[1:]):  # self loops per row
        e0, e1 = ptr[r0], ptr[r1]
        rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(ptr[r0:r1 + 1]))
        loops = rows[idx[e0:e1] == rows]
        deg[loops] -= 1
    m = int(deg.sum())
    with open(path, "wb") as fh:
        np.array([PARHIP_VERSION, n, m], dtype=np.uint64).tofile(fh)
        off = np.empty(n + 1, dtype=np.uint64)
        off[0] = 0
        np.cumsum(deg, out=off[1:])
        off *= np.uint64(8)
        off += np.uint64(24 + 8 * (n + 1))
        off.tofile(fh)
        del off
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            e0, e1 = ptr[r0], ptr[r1]
            rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(ptr[r0:r1 + 1]))
            cols = idx[e0:e1]
            cols[cols != rows].astype(np.uint64).tofile(fh)
        np.asarray(vw, dtype=np.int64).tofile(fh)
        two = np.full(min(m, LEAN_CHUNK), 2, dtype=np.int64)
        for s0 in range(0, m, LEAN_CHUNK):
            two[:min(LEAN_CHUNK, m - s0)].tofile(fh)
    return True


def kaminpar_graph(graph: Graph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0, context: str = "default",
                   threads: int = 1, vertex_weights: str = "nnz", handoff: str = "parhip") -> tuple[np.ndarray, int]:
    """Partition the METIS graph model of ``graph`` with KaMinPar; returns
    (part int64[n], KaMinPar's own edge cut of it (``kaminpar.edge_cut``))."""
    kp = _module()
    from ..options import _check_k

    _check_k(graph.n, k)
    imbalance = check_imbalance(imbalance)
    seed = check_seed(seed)
    context = check_context(context)
    threads = check_int("threads", threads, lo=1, hi=MAX_THREADS)
    if handoff not in HANDOFFS:
        raise BackendUnavailableError(f"unknown KaMinPar hand-off {handoff!r}; choose one of {', '.join(HANDOFFS)}")
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64), 0
    if vertex_weights not in ("nnz", "unit"):
        raise OptionError(f"vertex_weights must be 'nnz' or 'unit', not {vertex_weights!r}")
    vw = graph.balance_weights if vertex_weights == "nnz" else np.ones(graph.n, np.int64)
    # KaMinPar reads ε = 0 as "no block weight set" and refuses to run; half a unit of the ε-limit
    # ⌈W/k⌉ asks for that limit itself (the planner's ε = 0 is ⌊1·⌈W/k⌉⌋)
    eps_kp = imbalance if imbalance > 0.0 else 0.5 / max(1, -(-int(vw.sum()) // k))
    with scratch_dir("partplan-kaminpar") as d:
        path = Path(d) / f"graph.{handoff}"
        if handoff != "parhip" or not write_parhip_lean(path, graph, vw):
            xadj, adjncy, ew, vw = metis_graph(graph, vertex_weights=vertex_weights)
            if handoff == "parhip":
                write_parhip(path, xadj, adjncy, ew, vw)
            else:
                path.write_text(metis_text(xadj, adjncy, ew, vw))
            del xadj, adjncy, ew  # (the file holds them)
        fmt = kp.GraphFileFormat.PARHIP if handoff == "parhip" else kp.GraphFileFormat.METIS
        try:
            g = kp.load_graph(str(path), fmt, compress=context.startswith("terapart"))
            kp.reseed(int(seed) & (2 ** 31 - 1))
            engine = kp.KaMinPar(int(threads), kp.context_by_name(context))
            part = np.asarray(engine.compute_partition(g, int(k), float(eps_kp)), dtype=np.int64)
            cut = int(kp.edge_cut(g, part.tolist()))
        except (RuntimeError, ValueError, TypeError) as exc:
            raise PartitionError(f"KaMinPar failed on {graph.name} with k={k}: {exc}") from exc
    if part.size != graph.n or (part.size and (part.min() < 0 or part.max() >= k)):
        raise PartitionError(f"KaMinPar returned an invalid partition for k={k}")
    return part, cut


def run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    """The registry entry: graph model only."""
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("kaminpar partitions graphs only (model='graph')")
    if "preset" in opts:  # the planner's --preset carries the context name for this backend
        preset = opts.pop("preset")
        if "context" in opts and check_context(opts["context"]) != check_context(preset):
            raise OptionError(f"kaminpar: context={opts['context']!r} and preset={preset!r} name two "
                              f"contexts (they are one option: give one)")
        opts["context"] = preset
    part, cut = kaminpar_graph(model_obj, k, imbalance=imbalance, seed=seed, **opts)
    return part, {"edge_cut": cut, "context": check_context(opts.get("context", "default"))}


@dataclass(frozen=True)
class KaMinParContext:
    """KaMinPar (graph model)."""

    cli_where: ClassVar[str] = "with --engine kaminpar"
    context: str = option("default", "KaMinPar context", choices=CONTEXTS,
                          normalize=check_context)
    preset: str = option("default", "KaMinPar context (same as context)", choices=CONTEXTS,
                         normalize=check_context)
    threads: int = option(1, "worker threads (several: not reproducible)", lo=1, hi=MAX_THREADS,
                          cli="--threads")



engine("kaminpar", ("graph",), run, KaMinParContext, options=("context", "preset", "threads"))


def available() -> bool:
    try:
        _module()
    except BackendUnavailableError:
        return False
    return True


__all__ = ["CONTEXTS", "HANDOFFS", "check_context", "kaminpar_graph", "metis_text", "write_parhip", "run",
           "available", "KaMinParContext"]
