"""One MPI process of the distributed partitioner (run by :mod:`.distributed` under ``mpirun``).

``python -m partplan.partition.pipeline.mpi_worker CONFIG.json``. Each process reads
only its chunks of the chunked graph (a contiguous run of chunks balanced by
nonzeros), runs the engine on its row block, gathers the partition vector
(int32[n]: replicated, O(n)), refines max(send, recv) with
:func:`partplan.partition.refinement.distributed.refine_distributed` (after
connectivity passes on the engine's partition when ``passes_first`` asks for
them) — or, on a graph of at most ``gather_max_pins`` pins (nonzeros + rows),
with the single-process refinement in process 0 while process 1 runs the
single-process default pipeline, the better of the two kept (:func:`_gathered_refine`) —
lowers the total volume without raising that maximum (:func:`_volume`: the passes of
:mod:`partplan.partition.refinement.km1_pass` in process 0 while their counts fit, else the rounds of
:mod:`partplan.partition.refinement.distributed_volume`), recounts every figure, writes its slice of the output ``.npy``
(the launcher created it and renames it into place) and reports wall time
and peak RSS per stage. Any error is one ``partplan: error:`` line and an
MPI abort, so no process waits on a dead peer.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace

import numpy as np

from ..objectives import eps_limit
from ..options import DEFAULT_VOLUME_TOLERANCE


def _transpose(comm, bounds, lo, hi, indptr, indices):
    """The pins of nets [lo, hi): the rows holding each column, over all processes."""
    size = comm.Get_size()
    rows = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(indptr))
    dest = np.searchsorted(bounds, indices, side="right") - 1
    order = np.argsort(dest, kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(size + 1))
    out = [np.stack([indices[order][cuts[d]:cuts[d + 1]], rows[order][cuts[d]:cuts[d + 1]]]) for d in range(size)]
    got = np.concatenate(comm.alltoall(out), axis=1)
    col, row = got[0] - lo, got[1]
    o = np.lexsort((row, col))
    colptr = np.zeros(hi - lo + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=hi - lo), out=colptr[1:])
    return colptr, row[o]


def _symmetric(comm, lo, indptr, indices, block: int = 1 << 22) -> bool:
    """True when the pattern equals its transpose: the keyed hash sums of
    (u, v) and (v, u) over all nonzeros agree
    (:func:`~partplan.io.chunked.symmetry_hash_sums`). Memory: O(block)
    beyond the rows."""
    from ...io.chunked import symmetry_hash_sums
    rows = indptr.size - 1
    step = max(1, block // max(1, int(indptr[-1]) // max(rows, 1) + 1))
    mine = [0] * 4
    for r0 in range(0, rows, step):   # blocks of rows
        r1 = min(rows, r0 + step)
        u = np.repeat(np.arange(lo + r0, lo + r1, dtype=np.int64), np.diff(indptr[r0:r1 + 1]))
        sums = symmetry_hash_sums(u, indices[indptr[r0]:indptr[r1]], None)[:4]
        mine = [(x + y) % (1 << 64) for x, y in zip(mine, sums)]
    tot = [sum(v) % (1 << 64) for v in zip(*comm.allgather(mine))]
    return tot[0:2] == tot[2:4]


#: bytes of pin counts process 0 may hold for the connectivity passes beyond its share of the graph
PASS_BUFFER = 1 << 30


def _counts_in_process0(comm, sl, k: int, symmetric: bool, where: str) -> bool:
    """Do the connectivity passes run in process 0 (:func:`_km1`)? ``where`` is the context's
    ``volume_passes``: 'auto' keeps them there while their uint16[n, k] pin counts (2·n·k
    bytes) fit in process 0's share of the graph (8 bytes per nonzero of its rows) or in
    ``PASS_BUFFER``, whichever is more, and within the passes' own limit
    (``km1_pass.DEFAULT_MAX_BYTES``), so no process holds more than its share plus that much
    again or a fixed buffer; a directed pattern's nets are its columns, which the
    one-process passes do not read. (The rounds cost more time for less volume removed —
    R-MAT 20, k = 64, N = 2: 15.2 s for 74 % of what the passes remove in 4.6 s — so they
    run only where the counts would not fit.)"""
    from ..refinement.km1_pass import DEFAULT_MAX_BYTES
    if not symmetric or where == "distributed":
        return False
    if where == "process0":
        return True
    share = 8 * int(comm.bcast(int(sl.indices.size), root=0))
    return 2 * sl.n * k <= min(DEFAULT_MAX_BYTES, max(share, PASS_BUFFER))


def _volume(comm, cfg: dict, sl, part: np.ndarray, k: int, eps: float, symmetric: bool, ctx,
            passes: int = 3, started: float | None = None) -> dict | str:
    """The connectivity passes (less total volume, no higher max(send, recv)) on ``part``
    (updated in place on every process): in process 0 (:func:`_km1`) or as rounds over every
    process's rows (:func:`partplan.partition.refinement.distributed_volume.volume_rounds`), by
    :func:`_counts_in_process0`; with 'auto', the rounds also when the passes in process 0 could
    not run (their counts above their limit, memory, the disk). ``started``: process 0's
    ``time.perf_counter()`` when the refinement began; the rounds get what is left of
    ``ctx.time_limit`` after it (the whole limit when None). Returns their stats or why they
    were skipped."""
    if _counts_in_process0(comm, sl, k, symmetric, ctx.volume_passes):
        out = _km1(comm, cfg, part, k, eps, symmetric, passes)
        if isinstance(out, dict) or ctx.volume_passes == "process0":
            return out
    from ..refinement.distributed_volume import volume_rounds
    if ctx.time_limit is not None and started is not None:   # process 0's clock, as the rounds' own checks
        used = comm.bcast(time.perf_counter() - started if comm.Get_rank() == 0 else None, root=0)
        ctx = replace(ctx, time_limit=max(0.0, ctx.time_limit - used))
    return volume_rounds(comm, sl, part, k, eps, ctx, passes=passes,
                         progress=_progress(cfg) if comm.Get_rank() == 0 else None)


def _km1(comm, cfg: dict, part: np.ndarray, k: int, eps: float, symmetric: bool, passes: int = 3) -> dict | str:
    """The greedy connectivity passes (:mod:`partplan.partition.refinement.km1_pass`) on the
    refined parts, in process 0 (``part`` updated in place on every process):
    less total volume, no higher max(send, recv). Skipped for a directed
    pattern (its nets are the columns, not the rows read), when the pin
    counts exceed the pass's limit, or when memory or the disk fails it (the
    refined parts then stay). Returns its stats or why it was skipped."""
    from ...errors import OptionError
    from ..refinement.km1_pass import km1_passes
    if not symmetric:
        return "skipped: a directed pattern's nets are its columns, not the rows the pass reads"
    out: dict | str = {}
    if comm.Get_rank() == 0:
        try:
            st: dict = {}
            part[:] = km1_passes(cfg["graph"], part, k, eps=eps, passes=passes, symmetric=True, stats=st,
                                 progress=_progress(cfg))
            st["where"] = "process 0"
            out = st
        except OptionError as exc:   # the counts do not fit
            out = f"skipped: {exc}"
        except (MemoryError, OSError) as exc:   # the refined parts stay as they are
            out = f"skipped: {type(exc).__name__}: {exc}"
    comm.Bcast(part, root=0)
    return comm.bcast(out, root=0)


def _whole_context(cfg: dict, eps: float, ctx):
    """The single-process pipeline's context for the whole-graph stage: ``--nprocs``'s ε and seed,
    its time limit (an infinite one is none), every other option at the single-process default."""
    from ..context import PipelineContext, resolve
    limit_s = ctx.time_limit if ctx.time_limit is not None and math.isfinite(ctx.time_limit) else None
    return resolve(PipelineContext, {"imbalance": eps, "seed": int(cfg["seed"]), "time_limit": limit_s},
                   label="the whole-graph refinement")


def _read_whole(cfg: dict):
    """The whole graph, or why this process cannot read or hold it (MemoryError, OSError)."""
    from ...io.chunked import read_chunked
    try:
        return read_chunked(cfg["graph"])
    except (MemoryError, OSError) as exc:
        return f"skipped: {type(exc).__name__}: {exc}"


def _refined_whole(cfg: dict, g, part: np.ndarray, k: int, pctx, weight_cap: int, engine: str):
    """The engine's partition refined by :func:`~partplan.partition.pipeline.auto.refine_partition`
    on the whole graph ``g``. Returns (part int32[n], summary) or why not (MemoryError, OSError, a
    partplan error)."""
    from ...errors import PartplanError
    from .auto import heaviest_part, refine_partition
    try:
        t0 = time.perf_counter()
        new, rep = refine_partition(g, part, k, context=pctx, weight_cap=weight_cap,
                                    engine=engine, progress=_progress(cfg, f"{engine}'s partition: "))
    except (MemoryError, OSError, PartplanError) as exc:
        return f"skipped: {type(exc).__name__}: {exc}"
    b, a = rep["before"], rep["after"]
    return new.astype(np.int32), {"heaviest": heaviest_part(g, new, k),
        "max_before": b["max_send_recv"], "max_after": a["max_send_recv"], "total_before": b["total_volume"],
        "total_after": a["total_volume"], "vcycle_kept": rep["vcycle"]["kept"] if rep["vcycle"] else None,
        "refine_rounds": len(rep["refine"]["rounds"]) if rep.get("refine") else 0,
        "cycles": len(rep["cycles"]["trail"]) if rep.get("cycles") else 0,
        "seconds": round(time.perf_counter() - t0, 3)}


def _pipeline_whole(cfg: dict, g, k: int, pctx, weight_cap: int):
    """The single-process default pipeline (:func:`~partplan.partition.pipeline.auto.auto_partition`,
    the same context as ``partition(graph, k)`` with ``--nprocs``'s ε and seed) on the whole graph
    ``g``. Returns (part int32[n], summary), or why it is not a candidate: this process could not
    hold its state (MemoryError, OSError), a start engine failed (a partplan error: e.g. KaMinPar
    refuses ε = 0), or its heaviest part is above ``weight_cap`` (a row heavier than the balance
    limit)."""
    from ...errors import PartplanError
    from .auto import auto_partition, figures, heaviest_part
    try:
        t0 = time.perf_counter()
        new, rep = auto_partition(g, k, context=pctx, progress=_progress(cfg, "the single-process pipeline: "))
        f, heaviest = figures(g, new, k), heaviest_part(g, new, k)
    except (MemoryError, OSError, PartplanError) as exc:
        return f"skipped: {type(exc).__name__}: {exc}"
    if heaviest > weight_cap:
        return f"skipped: its heaviest part holds {heaviest:,} nonzeros, above the limit {weight_cap:,}"
    return new.astype(np.int32), {"max": f["max_send_recv"], "total": f["total_volume"], "heaviest": heaviest,
                                  "chosen": rep["chosen"],
                                  "seconds": round(time.perf_counter() - t0, 3)}


def _said(candidate: dict | str, top: str, total: str) -> str:
    """A candidate's figures for a progress line, or why it is not one."""
    if isinstance(candidate, str):
        return candidate
    return f"max(send, recv) {candidate[top]:,}, total {candidate[total]:,}"


def _wait_idle(comm, poll_s: float = 0.005) -> None:
    """A barrier whose waiting processes sleep between polls: a blocking MPI collective spins on its
    core, which the process still working (the pipeline's lanes) could use."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll_s)


def engine_kept(refined: dict, pipeline: dict, tolerance: float, limit: int | None = None) -> bool:
    """Whether the engine's refined partition is kept over the single-process pipeline's: within the
    weight ``limit`` (row nonzeros of the heaviest part, ``heaviest``) when the pipeline's is not,
    never when only the pipeline's is (None: not compared); else no worse on both max(send, recv)
    and total volume, or a lower maximum for a total at most (1 + ``tolerance``) × the pipeline's
    (the pipeline's own volume allowance for a lower maximum).

    >>> engine_kept({"max_after": 9, "total_after": 100}, {"max": 10, "total": 103}, 0.03)
    True
    >>> engine_kept({"max_after": 9, "total_after": 104}, {"max": 10, "total": 100}, 0.03)
    False
    >>> engine_kept({"max_after": 10, "total_after": 100}, {"max": 10, "total": 100}, 0.03)
    True
    >>> engine_kept({"max_after": 1, "total_after": 2, "heaviest": 5}, {"max": 2, "total": 4, "heaviest": 4}, 0.03, 4)
    False
    """
    if limit is not None:
        a_in, b_in = refined["heaviest"] <= limit, pipeline["heaviest"] <= limit
        if a_in != b_in:
            return a_in
    a_max, a_tot, b_max, b_tot = refined["max_after"], refined["total_after"], pipeline["max"], pipeline["total"]
    return (a_max <= b_max and a_tot <= b_tot) or (a_max < b_max and a_tot <= (1.0 + tolerance) * b_tot)


def _gathered_refine(comm, cfg: dict, part: np.ndarray, k: int, eps: float, ctx, weight_cap: int,
                     engine: str, limit: int) -> dict | str:
    """The whole graph in the processes' memory (run by :func:`run` on a graph of at most
    ``ctx.gather_max_pins`` pins, nonzeros + rows: a bounded buffer, as multilevel partitioners
    gather their coarsest graph); ``part`` (the ``engine``'s partition after the repair rounds,
    and the ``passes_first`` passes when asked for) updated in place on every process.

    Two candidates, side by side:

    - process 0 refines the engine's partition with the single-process pipeline's refinement
      (:func:`partplan.partition.pipeline.auto.refine_partition`: a km1 V-cycle, FM passes whose
      moves may first raise the cost, restarted with new seeds, then a volume round and refine /
      volume cycles), keeping ``weight_cap`` (the most row nonzeros a part may hold: the limit
      :func:`~partplan.partition.objectives.eps_limit`, or the engine's heaviest part when above it) beside the
      balance limit;
    - with ``ctx.gather_pipeline``, process 1 (process 0 when it is alone) runs the single-process
      default pipeline on the graph (:func:`_pipeline_whole`), whose starts (METIS, KaMinPar,
      Mt-KaHyPar by size) are what the engine's partition competes with.

    The engine's is kept when :func:`engine_kept` says so (``limit``: the weight limit, which a
    candidate within it wins against one above it), the pipeline's otherwise. Both budgets
    are the single-process pipeline's counted work (the same result on every machine), or
    ``ctx.time_limit`` when one is set. Returns the figures of both and the one ``kept``
    ("engine" or "pipeline"), or why neither ran (the caller then runs the distributed
    rounds)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    pipe = (1 if size > 1 else 0) if ctx.gather_pipeline else None
    refined = pipeline = "skipped: not run here"
    if rank in (0, pipe):   # one read of the whole graph per process, for its candidate(s)
        g, pctx = _read_whole(cfg), _whole_context(cfg, eps, ctx)
        if rank == 0:
            refined = g if isinstance(g, str) else _refined_whole(cfg, g, part, k, pctx, weight_cap, engine)
        if rank == pipe:
            pipeline = g if isinstance(g, str) else _pipeline_whole(cfg, g, k, pctx, weight_cap)
        del g
    _wait_idle(comm)
    a = comm.bcast(refined[1] if isinstance(refined, tuple) else refined, root=0)
    b = comm.bcast(pipeline[1] if isinstance(pipeline, tuple) else pipeline, root=pipe) \
        if pipe is not None else "skipped: gather_pipeline = 0"
    if isinstance(a, str) and isinstance(b, str):
        return a
    kept = "engine" if isinstance(b, str) or (
        isinstance(a, dict) and engine_kept(a, b, DEFAULT_VOLUME_TOLERANCE, limit)) else "pipeline"
    say = _progress(cfg) if rank == 0 else None
    if say is not None:
        said = (_said(a, "max_after", "total_after"), _said(b, "max", "total"))
        say(f"kept {'the ' + engine + ' partition refined' if kept == 'engine' else 'the single-process pipeline'}"
            f" ({engine} refined: {said[0]}; pipeline: {said[1]})")
    root = 0 if kept == "engine" else pipe
    if rank == root:
        part[:] = (refined if kept == "engine" else pipeline)[0]
    comm.Bcast(part, root=root)
    after = (a["max_after"], a["total_after"]) if kept == "engine" else (b["max"], b["total"])
    return {"kept": kept, "max_after": after[0], "total_after": after[1], "engine_refined": a, "pipeline": b}


def _choose(comm, cfg: dict, info, k: int, indptr: np.ndarray, symmetric: bool) -> dict:
    """The engine of ``--nprocs`` without ``--engine`` (:func:`.distributed.default_engine`), from the
    degree histogram of every process's rows summed over the processes (no second read of the graph);
    every process reaches the same choice. Returns {"engine", "reason", "stats"}."""
    from .distributed import default_engine
    from .engine_rule import stats_from_histogram
    mine = np.bincount(np.diff(indptr))
    width = max(comm.allgather(int(mine.size)))
    hist = np.zeros(width, np.int64)
    hist[:mine.size] = mine
    total = np.zeros_like(hist)
    from mpi4py import MPI
    comm.Allreduce(hist, total, op=MPI.SUM)
    stats = stats_from_histogram(total, n=info.n, nnz=info.nnz, symmetric=symmetric, directed=bool(info.directed),
                                 k=k)
    engine, reason = default_engine(stats)
    engine, reason = comm.bcast((engine, reason), root=0)     # one choice, whatever a process's libraries say
    if comm.Get_rank() == 0:
        say = _progress(cfg)
        if say is not None:
            say(f"engine {engine}: {reason}")
    return {"engine": engine, "reason": reason, "stats": stats}


def spread_isolated(comm, sl, part: np.ndarray, k: int, eps: float) -> dict:
    """Give the isolated rows (no nonzero in their row or their column) to the parts as the
    single-process pipeline does (:func:`.auto.spread_isolated`): where the fewest rows of H are,
    within the ε-limit of the balance weights (row nonzeros, at least 1 per row;
    :func:`.auto.fill_isolated`), the isolated rows in id order to the parts in id order. They
    carry no volume and no compute, so send, recv and every part's nonzeros stay as they are; the
    engines and the refinement weigh rows by their nonzeros, which leaves these rows where the
    engine put them — often in one part (R-MAT 15, k = 16, Zoltan: 8,152 of 8,551 in one part,
    which then held 4.9x the mean rows of H). Updates ``part[lo:hi]`` (the other processes' rows
    of the replicated vector are left as they were). Returns {"rows": isolated rows, "moved": rows
    that changed part, "max_rows": the most rows of H in one part, "mean_rows": n / k}. Runs with
    the refinement (``refine=False`` returns the engine's partition as it is)."""
    from mpi4py import MPI

    from .auto import fill_isolated

    lo, hi = sl.lo, sl.hi
    nnz = np.diff(sl.indptr)
    iso = (nnz == 0) & (np.diff(sl.colptr) == 0)
    mine = part[lo:hi]          # a view: written in place
    w = np.maximum(nnz, 1)
    load = np.bincount(mine[~iso], weights=w[~iso], minlength=k).astype(np.int64)
    rows = np.bincount(mine[~iso], minlength=k).astype(np.int64)
    comm.Allreduce(MPI.IN_PLACE, load, op=MPI.SUM)
    comm.Allreduce(MPI.IN_PLACE, rows, op=MPI.SUM)
    m = int(iso.sum())
    total = int(comm.allreduce(m, op=MPI.SUM))
    first = int(comm.exscan(m, op=MPI.SUM) or 0)       # this process's isolated rows come after these
    moved = 0
    if total:
        counts = fill_isolated(load, rows, total, eps_limit(int(load.sum()) + total, k, eps))
        ends = np.cumsum(counts)                         # the parts in id order: rows [ends[p-1], ends[p]) to p
        new = np.searchsorted(ends, np.arange(first, first + m), side="right").astype(part.dtype)
        moved = int((mine[iso] != new).sum())
        mine[iso] = new
        rows += counts
    return {"rows": total, "moved": int(comm.allreduce(moved, op=MPI.SUM)), "max_rows": int(rows.max()),
            "mean_rows": round(sl.n / k, 3)}


# the k × k volume matrices a process holds while the final figures are counted (process 0: its own
# and the sum, 2 × 8 k² bytes; 64 MiB: k ≤ 2,048)
STATS_MATRIX_MAX_BYTES = 64 << 20
#: what a directed graph's figures here leave out (the one-process partitioner reports it as
#: ``stats.backward``; counting it here would need the columns of A, which no process holds)
BACKWARD_NOTE = ("the figures count the forward exchange A @ H; a directed graph's backward exchange "
                 "A^T @ G is not counted here (partplan analyze GRAPH --partition FILE counts both)")


def _final_stats(comm, sl, part, k: int, nnz: int, send, recv, weights, *, f: int = 128,
                 dtype: str = "float32") -> dict:
    """The final partition's figures under the names of
    :meth:`partplan.metrics.CommStats.summary` (the one-process partitioner's JSON ``stats``: rows
    of H of ``f`` ``dtype`` values for the bytes and the time estimate), in process 0 ({} in the
    others). Messages, the edge cut and the sparsity-oblivious volume need the volume matrix
    (:func:`~partplan.partition.refinement.distributed.pair_volume`); where process 0's two of them
    would be above STATS_MATRIX_MAX_BYTES they are left out and ``stats_note`` says why. The
    matrix's row and column sums are checked against the recount ``send`` / ``recv`` (every
    process raises when they differ). Collective."""
    from ...metrics.stats import CommStats, per_part_summary
    from ..refinement.distributed import pair_volume

    from mpi4py import MPI

    # each process's own rows: the isolated rows' parts are set in their process alone
    sizes = np.bincount(part[sl.lo:sl.hi], minlength=k).astype(np.int64)
    comm.Allreduce(MPI.IN_PLACE, sizes, op=MPI.SUM)
    if 2 * k * k * 8 > STATS_MATRIX_MAX_BYTES:
        if comm.Get_rank() != 0:
            return {}
        return {**per_part_summary(k, part.size, nnz, send, recv, weights, sizes),
                "stats_note": f"messages, edge cut, oblivious volume, bytes and the time estimate are left out at "
                              f"k = {k:,}: their two {k:,} x {k:,} volume matrices are above the "
                              f"{STATS_MATRIX_MAX_BYTES >> 20} MiB process 0 may hold for them"}
    vol, cut = pair_volume(comm, sl, part, k)
    agrees = vol is None or (np.array_equal(vol.sum(axis=1), send) and np.array_equal(vol.sum(axis=0), recv))
    if not comm.bcast(bool(agrees), root=0):     # every process raises, none waits on a peer that did
        raise RuntimeError("internal error: the volume matrix differs from the recount")
    if vol is None:
        return {}
    return CommStats(k=k, n=int(part.size), nnz=int(nnz), f=f, dtype=dtype, volume=vol, part_sizes=sizes,
                     compute_load=np.asarray(weights, np.int64), edge_cut=cut).summary()


def run(cfg: dict) -> dict:
    from mpi4py import MPI

    from ..._process import Stages
    from ...io.chunked import chunk_info, process_rows, read_chunk_rows
    from ..context import DistributedRefineContext
    from ..engines import get_backend
    from ..refinement.distributed import RowSlice, recount, refine_distributed

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    st = Stages()
    st.start("read")
    info = chunk_info(cfg["graph"])
    n, k, eps = info.n, int(cfg["k"]), float(cfg["imbalance"])
    bounds = process_rows(info, size)
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    rows = read_chunk_rows(cfg["graph"], lo, hi, info=info)
    indptr, indices = rows.indptr.astype(np.int64), rows.indices.astype(np.int64)
    del rows                                    # the file's int32 columns: not kept beside the int64 copy
    symmetric = _symmetric(comm, lo, indptr, indices)
    if symmetric:
        colptr, colidx = indptr, indices
    else:
        colptr, colidx = _transpose(comm, bounds, lo, hi, indptr, indices)
    st.stop()
    sl = RowSlice(lo, hi, n, indptr, indices, colptr, colidx)
    st.start("engine")
    engine = cfg["engine"]
    choice = None
    if engine == "auto":   # chosen per graph from the processes' degree histograms, combined
        choice = _choose(comm, cfg, info, k, indptr, symmetric)
        engine = choice["engine"]
    backend = get_backend(engine)
    if not backend.on_mpi:
        raise ValueError(f"engine {engine} does not run on MPI processes")
    mine = backend.mpi_run(comm, sl, n, k, imbalance=eps, seed=int(cfg["seed"]), symmetric=symmetric,
                           graph_path=cfg["graph"], **cfg.get("engine_options", {}))
    counts = np.array(comm.allgather(hi - lo), np.int64)
    part = np.empty(n, np.int32)
    comm.Allgatherv(np.ascontiguousarray(mine, np.int32), [part, counts.tolist(), bounds[:-1].tolist(), MPI.INT])
    st.stop()
    ctx = DistributedRefineContext(**{**cfg.get("refine_context", {}), "seed": int(cfg["seed"])})
    km1_first: dict | str | None = None
    engine_result = None
    if cfg["refine"] and ctx.passes_first:   # less total volume before the rounds lower the maximum
        st.start("km1_first")
        s0, r0, w0 = recount(comm, sl, part, k)
        engine_result = {"total_volume": int(s0.sum()), "max_send": int(s0.max()), "max_recv": int(r0.max()),
                         "max_weight": int(w0.max())}
        km1_first = _volume(comm, cfg, sl, part, k, eps, symmetric, ctx, passes=ctx.passes_first)
        st.stop()
    st.start("refine")
    refine_t0 = time.perf_counter()
    say = _progress(cfg) if rank == 0 else None
    pins = info.nnz + n
    whole = cfg["refine"] and pins <= ctx.gather_max_pins   # held whole instead (_gathered_refine)
    # without the refinement (refine=False: the engine's partition as it is) no round runs, repairs
    # included; a graph held whole gets the repairs alone before its two candidates
    rctx = ctx if cfg["refine"] and not whole else \
        replace(ctx, rounds=0) if cfg["refine"] else replace(ctx, rounds=0, repair_rounds=0)
    res = refine_distributed(comm, sl, part, k, eps, rctx, progress=say)
    send, recv, weights = res.send, res.recv, res.weights
    st.stop()
    gathered: dict | str = "skipped: no refinement"
    if cfg["refine"]:
        st.start("gathered")
        if whole:
            limit = eps_limit(int(weights.sum()), k, eps)
            cap = max(limit, int(weights.max()))
            gathered = _gathered_refine(comm, cfg, part, k, eps, ctx, cap, engine, limit)
        else:
            gathered = f"skipped: {pins:,} pins (nonzeros + rows), above the {ctx.gather_max_pins:,} that " \
                "are held whole"
        if isinstance(gathered, dict):   # recount the new parts' figures, and check the refinement's own
            send, recv, weights = recount(comm, sl, part, k)
            if (int(send.sum()), int(max(send.max(), recv.max()))) != (gathered["total_after"],
                                                                       gathered["max_after"]) \
                    or int(weights.max()) > cap:
                raise RuntimeError("internal error: the whole-graph refinement's figures differ from the recount")
        st.stop()
        if whole and not isinstance(gathered, dict):   # neither candidate could be computed: the rounds
            st.start("refine")
            res = refine_distributed(comm, sl, part, k, eps, ctx, progress=say)
            send, recv, weights = res.send, res.recv, res.weights
            st.stop()
    km1: dict | str = "skipped: no refinement"
    if cfg["refine"]:
        st.start("km1")
        km1 = _volume(comm, cfg, sl, part, k, eps, symmetric, ctx, started=refine_t0)
        if isinstance(km1, dict):   # recount the figures of the new parts, and check the pass's own
            send, recv, weights = recount(comm, sl, part, k)
            if (int(send.sum()), int(max(send.max(), recv.max()))) != (km1["volume_after"], km1["max_load_after"]):
                raise RuntimeError("internal error: the connectivity passes' figures differ from the recount")
        st.stop()
    isolated: dict | str = "skipped: no refinement"
    if cfg["refine"]:
        st.start("isolated")
        isolated = spread_isolated(comm, sl, part, k, eps)
        st.stop()
    st.start("stats")
    stats = _final_stats(comm, sl, part, k, info.nnz, send, recv, weights, f=int(cfg.get("f", 128)),
                         dtype=str(cfg.get("dtype", "float32")))
    if stats and not symmetric:     # the one-process JSON has stats.backward for a directed graph
        stats["stats_note"] = "; ".join(x for x in (stats.get("stats_note"), BACKWARD_NOTE) if x)
    st.stop()
    st.start("write")
    from ..._atomic import open_npy
    ident = tuple(cfg["ident"]) if cfg.get("ident") else None
    out = open_npy(cfg["tmp"], np.int64, (n,), ident)
    out[lo:hi] = part[lo:hi]
    if hasattr(out, "flush"):
        out.flush()
    del out
    st.stop()
    stages = comm.gather({r["stage"]: {"wall_s": r["seconds"], "peak_rss_bytes": r["peak_rss_bytes"]}
                          for r in st.rows}, root=0)
    if rank != 0:
        return {}
    after = {"total_volume": int(send.sum()), "max_send": int(send.max()),
             "max_recv": int(recv.max()), "max_weight": int(weights.max())}
    return {"engine": engine, "nprocs": size, "n": n, "nnz": info.nnz, "k": k, "imbalance": eps,
            "symmetric": symmetric, "engine_result": engine_result or res.before, "result": after,
            "send": send.tolist(), "recv": recv.tolist(), "compute_load": weights.tolist(),
            "refine": {"rounds": res.rounds, "moved": res.moved, "phases": res.phases,
                       "cluster_moved": res.cluster_moved, "seconds": round(res.seconds, 3),
                       "total_volume": int(res.send.sum()), "max_send": int(res.send.max()),
                       "max_recv": int(res.recv.max())},
            "gathered": gathered, "km1": km1, "isolated": isolated, **({"km1_first": km1_first} if km1_first is not None else {}),
            "row_bounds": bounds.tolist(), "stages": stages, "stats": stats,
            **({"engine_choice": choice} if choice is not None else {})}


def _progress(cfg, prefix: str = ""):
    if cfg.get("quiet"):
        return None

    def say(msg: str) -> None:
        print(f"partplan: {prefix}{msg}", file=sys.stderr, flush=True)
    return say


def main(argv: list[str] | None = None) -> int:
    from ..._process import die_with_parent
    die_with_parent()   # mpirun dies with the launcher, this rank with mpirun
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    from mpi4py import MPI
    try:
        result = run(cfg)
        if result:
            from ..._atomic import write_json_atomic
            write_json_atomic(result, cfg["report"])
    except Exception as exc:   # one line, then every process leaves
        print(f"partplan: error: rank {MPI.COMM_WORLD.Get_rank()}: {exc}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(2)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
