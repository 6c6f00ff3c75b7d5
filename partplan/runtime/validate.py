"""Check a plan: structure, counts, ids, the planned matrix, and a replay.

(Above the runtime: it replays plans through it. ``partplan.plan.validate_plan``
is this module's function.)

Every check runs the plan's own programs — there is one interpreter
(:class:`partplan.runtime.Executor`); here it runs on
:class:`~partplan.runtime.LocalComm` (all ranks in this process, numpy):

* ``structure`` — per step and rank: index arrays inside their buffers, CSR
  pointers valid, counts non-negative and summing to the buffer sizes;
* ``counts`` — every alltoallv step: what q sends r equals what r expects
  from q, and both equal the manifest's pairs (the executor's start-up check);
* ``ids`` — the global ids of the rows are pushed through the program: every
  received row is the one the receiver lists (``recv_ids``), every row a
  local SpMM reads was written, no received row goes unread, replicas reduce
  the same rows, folds add partial rows to the right rows, and each program
  ends with its ``out_ids``; outputs of the writing ranks cover every vertex
  exactly once;
* ``matrix`` — the nonzeros the SpMM steps multiply reassemble exactly the
  planned matrix (fingerprint of A, or of A^T for a separate backward);
* ``replay`` — ``A @ H`` through the program equals scipy's: bitwise for 1D
  with float64 H (local CSRs keep scipy's summation order), exactly with an
  integer-valued H when A's values are integers (and its sums stay below
  2^53), else within 1e-12 relative; the backward program likewise against
  ``A^T @ G``. H is scaled by a power of two so that no replay overflows
  float64, whatever the range of A's values: a correct plan is never
  reported invalid because of it.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import PlanError
from ..graph import Graph
from ..program.plan import Plan, program_steps
from ..program.steps import step_op, structure_problems
from ..layouts import layout_from_manifest
from ..plan.store import load_plan


class _Report:
    def __init__(self):
        self.checks = []

    def add(self, name: str, problems: list[str], detail: str = ""):
        self.checks.append({"name": name, "ok": not problems, "detail": detail if not problems
                            else "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")})


def _in_range(a, lo, hi):
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) < hi)


def _structure(plan: Plan) -> list[str]:
    """Per rank: :func:`partplan.program.checks.shard_problems` — the checks every
    reader of a shard runs before it indexes (array types, ids in [0, n),
    counts equal to the manifest's pairs, buffer sizes the arrays can fill,
    each step op's :meth:`~partplan.program.steps.Step.check`); here reported
    instead of raised."""
    from ..program.schema import shard_name
    from ..layouts import layout_from_manifest
    from ..program.checks import shard_problems
    layout = layout_from_manifest(plan.manifest)
    return [f"rank {rp.rank} ({shard_name(rp.rank)}): {m}" for rp in plan.ranks
            for m in shard_problems(plan.manifest, rp, layout=layout)]


class _Walk:
    """State of the id walk that each step op's ``walk`` advances: ``ranks``
    (shards), ``sizes`` (buffer rows per rank), ``bufs`` (int64 id columns, −1 =
    unwritten), ``comm`` (LocalComm), ``recv`` (rows an alltoallv wrote, per
    buffer), ``trip`` (rows, cols, values multiplied), ``probs``."""

    def __init__(self, plan: Plan, program: str):
        from .comm import LocalComm
        self.ranks = plan.ranks
        self.sizes = [rp.buffers(program) for rp in plan.ranks]
        self.comm = LocalComm(len(plan.ranks), plan.groups())
        self.bufs = []
        for rp, sizes in zip(plan.ranks, self.sizes):
            b = {name: np.full((rows, 1), -1, dtype=np.int64) for name, rows in sizes.items()}
            b["in"] = rp.in_ids(program).reshape(-1, 1).astype(np.int64)
            self.bufs.append(b)
        self.recv = [dict() for _ in plan.ranks]
        self.trip = ([], [], [])
        self.probs: list[str] = []


def _id_walk(plan: Plan, program: str, n: int) -> tuple[list[str], tuple]:
    """Push global ids (int64, one column) through the program; see the module doc.
    Returns (problems, (rows, cols, data) of every multiplied nonzero)."""
    w = _Walk(plan, program)
    R, bufs, probs = w.ranks, w.bufs, w.probs
    for st in program_steps(plan.manifest, program):
        step_op(st).walk(w, st)
    for i, rp in enumerate(R):
        out = bufs[i]["out"][:, 0].copy()
        zero_rows = out == -2  # zeroed by a scatter_add and never added to: an empty row, Z = 0
        out[zero_rows] = rp.out_ids(program)[zero_rows]
        if not np.array_equal(out, rp.out_ids(program)):
            probs.append(f"rank {rp.rank}: the {program} program ends with rows other than its out_ids")
    cover = np.zeros(n, dtype=np.int64)
    for rp in R:
        if rp.writes_output(program):
            ids = rp.out_ids(program)
            if _in_range(ids, 0, n):
                np.add.at(cover, ids, 1)
    if not np.all(cover == 1):
        v = int(np.flatnonzero(cover != 1)[0])
        probs.append(f"vertex {v} is written by {int(cover[v])} ranks' outputs (expected 1)")
    hold = np.zeros(n, dtype=bool)
    for rp in R:
        ids = rp.in_ids(program)
        if _in_range(ids, 0, n):
            hold[ids] = True
    if not hold.all():
        probs.append(f"vertex {int(np.flatnonzero(~hold)[0])} is an input row of no rank")
    return probs, w.trip


def _matrix(trip, n: int):
    r, c, d = (np.concatenate(x) if x else np.zeros(0) for x in trip)
    A = sp.coo_matrix((d, (r.astype(np.int64), c.astype(np.int64))), shape=(n, n)).tocsr()
    return A, int(r.size)


def _partition_agrees(plan: Plan) -> list[str]:
    """1d-style check against partition.arrow: rank r's outputs are part == r's rows."""
    probs = []
    lay = layout_from_manifest(plan.manifest)
    per_block = lay.ranks // lay.row_blocks
    for rp in plan.ranks:
        out = rp.out_ids("forward")
        if not _in_range(out, 0, plan.part.size):
            continue
        want = rp.rank // per_block
        if np.any(plan.part[out] != want):
            probs.append(f"rank {rp.rank}: its output rows are not the rows with part == {want} in partition.arrow")
            break
    return probs


def _compare(Z, ref, exact: bool, what: str, problems: list, details: list, A=None, H=None):
    if exact:
        if not np.array_equal(Z, ref):
            problems.append(f"{what} differs from scipy (max |diff| {float(np.abs(Z - ref).max()):.3g}); "
                            f"expected bitwise equality")
        else:
            details.append(f"{what} bitwise equal to scipy")
    else:
        err = float(np.abs(Z - ref).max()) if Z.size else 0.0
        scale = float((abs(A) @ np.abs(H)).max()) if Z.size else 0.0
        if err > 1e-12 * max(scale, 1.0):
            problems.append(f"{what} differs from scipy by {err:.3g} (scale {scale:.3g})")
        details.append(f"{what}: max |diff| {err:.2g}")


def _matrix_claims(m: dict, A) -> list[str]:
    """What the manifest says of the matrix the shards multiply (``A``, reassembled), checked where the
    shards alone decide it: an unnormalized plan's ``graph.source_fingerprint`` is that matrix's own
    (:attr:`Graph.matrix_fingerprint`); a "mean" plan's rows each sum to 1 (or hold only zeros: a
    degree of 0). A "gcn" plan's values need the input's degrees (``--graph`` checks them)."""
    out = []
    norm, mg = m.get("normalize"), m.get("graph", {})
    if norm is None and mg.get("source_fingerprint") is not None:
        A = A.tocsr()
        g = Graph(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data)
        # (plans written before the values were hashed recorded the pattern's fingerprint there)
        if mg["source_fingerprint"] not in (g.matrix_fingerprint, mg.get("fingerprint")):
            out.append(f"field 'graph.source_fingerprint' {str(mg['source_fingerprint'])[:16]}… is not the "
                       f"fingerprint of the matrix the shards multiply ({g.matrix_fingerprint[:16]}…)")
    if norm == "mean":
        A = A.tocsr()
        sums = np.asarray(A.sum(axis=1)).ravel()
        mags = np.asarray(abs(A).sum(axis=1)).ravel()
        full = np.diff(A.indptr) > 0
        bad = full & (mags > 0) & ~(np.abs(sums - 1.0) <= 1e-9 * np.maximum(mags, 1.0))
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            out.append(f"field 'normalize' is \"mean\", but row {r} of the matrix sums to {sums[r]:.17g}, not 1 "
                       f"({int(bad.sum())} such rows)")
    return out


def validate_plan(path, graph: Graph | None = None, *, seed: int = 0, f: int = 4,
                  replay_check: bool = True) -> dict:
    """Validate the plan at ``path``; returns a report dict ``{"ok", "checks", ...}``.

    Raises :class:`PlanError` when the plan cannot be loaded (corrupted,
    truncated, missing shard, unknown version, another graph, a malformed
    ``topology`` object), and :class:`~partplan.errors.OptionError`
    when the replay's features (``f`` columns) would not fit the memory
    budget (:func:`check_replay_budget`), before any shard is read.
    Consistency failures are reported (``ok`` False) with the first offending
    ranks. ``seed`` is any integer (a negative one maps into numpy's range as
    :func:`partplan._seed.numpy_seed` maps it).
    """
    from .spmm import local_executor, replay
    from .._args import check_bool, check_int, check_path
    from .._seed import check_seed, numpy_seed
    if not isinstance(path, (str, os.PathLike)):   # a Plan object: validate_plan reads a written plan
        raise PlanError(f"validate_plan checks a plan directory (str or os.PathLike), got {type(path).__name__}"
                        + ("; write it first (partplan.write_plan)" if isinstance(path, Plan) else ""))
    check_path("path", path, error=PlanError)
    f = check_int("f (feature columns of the replay)", f, lo=1, error=PlanError)
    check_seed(seed, error=PlanError)
    replay_check = check_bool("replay_check", replay_check, error=PlanError)
    m0 = precheck(path, f=f, replay_check=replay_check)
    if graph is not None:  # a normalized plan is checked against the normalized input graph
        from ..plan.store import source_matches
        if m0.get("normalize") and source_matches(m0, graph):
            from ..models.normalize import normalize_adjacency
            graph = normalize_adjacency(graph, m0["normalize"])
        elif (not m0.get("normalize") and isinstance(graph, Graph)
              and graph.fingerprint == m0.get("graph", {}).get("fingerprint") and not source_matches(m0, graph)):
            raise PlanError(f"{path}: the given graph {graph.name!r} has the plan's pattern but other values "
                            f"(its matrix fingerprint {graph.matrix_fingerprint[:16]}… is not the plan's source "
                            f"{str(m0['graph'].get('source_fingerprint'))[:16]}…): pass the graph the plan was "
                            f"built from")
    plan = load_plan(path, graph=graph, check=False)  # the shard checks are reported below, not raised
    m = plan.manifest
    n = m["graph"]["n"]
    rep = _Report()
    progs = [p for p in ("forward", "backward") if p in m["programs"] and "same_as" not in m["programs"][p]]
    struct = _structure(plan)
    rep.add("structure", struct, "indices, CSR pointers, counts and buffer sizes fit; ids inside [0, n)")
    if struct:
        return _result(path, m, graph, rep)
    try:
        local_executor(plan)  # the executor's own start-up count check, all ranks
        rep.add("counts", [], "send q→r == recv r←q in every group and step, equal to the manifest's pairs; "
                              "the rows an exchange from the input rows sends are those its receivers list")
    except PlanError as exc:
        rep.add("counts", [str(exc)])
        return _result(path, m, graph, rep)
    walks = {}
    ids_probs = []
    for prog in progs:
        try:
            pr, trip = _id_walk(plan, prog, n)
        except PlanError as exc:
            pr, trip = [str(exc)], ([], [], [])
        ids_probs += [f"{prog}: {x}" for x in pr]
        walks[prog] = trip
    ids_probs += _partition_agrees(plan)
    rep.add("ids", ids_probs, "every received row is the one listed, every read row written, outputs cover "
                              "each vertex once")
    if ids_probs:
        return _result(path, m, graph, rep)
    mprobs, mats = [], {}
    for prog in progs:
        A, seen = _matrix(walks[prog], n)
        mats[prog] = A
        g2 = Graph.from_scipy(A, pattern=True)
        want = m["graph"]["fingerprint"] if prog == "forward" else Graph.from_scipy(mats["forward"].T.tocsr(),
                                                                                   pattern=True).fingerprint
        if seen != m["graph"]["nnz"] or g2.fingerprint != want:
            mprobs.append(f"{prog}: the shards multiply {seen} nonzeros whose pattern fingerprint "
                          f"{g2.fingerprint[:16]}… is not the planned matrix's {want[:16]}… (nnz {m['graph']['nnz']})")
    rep.add("matrix", mprobs, "the SpMM steps multiply exactly the planned matrix (fingerprint match)")
    if not mprobs:
        from ..plan.checks import recount
        rep.add("manifest", recount(plan, mats) + _matrix_claims(m, mats["forward"]),
                "per-shard summaries and stats equal a recount from the shards; the source fingerprint and "
                "the normalization fit the matrix")
    if replay_check and not mprobs:
        ref = graph.to_scipy() if graph is not None else mats["forward"]
        rng = np.random.default_rng(numpy_seed(seed))
        integral = bool(np.all(ref.data == np.round(ref.data)))
        problems, details = [], []
        one_d = layout_from_manifest(plan.manifest).exact_replay
        for prog in ("forward", "backward"):
            if prog not in m["programs"]:
                continue
            A = ref if prog == "forward" else ref.T.tocsr()
            try:
                shift, reach = _range_of(A)
                H = np.ldexp(rng.standard_normal((n, f)), -shift)   # a power of two: the same rounding
                _compare(replay(plan, H, prog), A @ H, one_d, f"{prog} replay", problems, details, A, H)
                if integral and reach + 3 < 53:     # |sums| < 2^53: integer sums are exact in any order
                    Hi = rng.integers(-8, 9, size=(n, f)).astype(np.float64)
                    _compare(replay(plan, Hi, prog), A @ Hi, True, f"{prog} integer replay", problems, details)
                elif integral:
                    details.append(f"{prog} integer replay skipped (sums reach 2^{reach + 3}, beyond exact "
                                   f"float64 integers)")
            except PlanError as exc:
                problems.append(str(exc))
        rep.add("replay", problems, "; ".join(details))
    return _result(path, m, graph, rep)


def precheck(path, *, f: int, replay_check: bool = True, option: str = "f") -> dict:
    """What :func:`validate_plan` checks before it reads a shard: the
    manifest (:func:`partplan.plan.store.read_manifest`, its ``topology``
    object included) and, with ``replay_check``, the replay's memory
    (:func:`check_replay_budget`, errors naming ``option``). Returns the
    manifest."""
    from ..plan.store import read_manifest
    m = read_manifest(path)
    if replay_check:
        check_replay_budget(path, f, option=option, manifest=m)
    return m


#: float64 arrays of n × f a replay holds at once: H, the program's output and scipy's A @ H
REPLAY_COPIES = 3


def check_replay_budget(path, f: int, option: str = "f", manifest: dict | None = None) -> int:
    """The replay's n × f float64 features (:data:`REPLAY_COPIES` of them; n
    from the plan's manifest, checked against its partition file) against the
    memory budget (:mod:`partplan._budget`), before anything is read or
    allocated: one :class:`~partplan.errors.OptionError` naming ``option``
    (``manifest``: the plan's, already read). Returns the bytes."""
    from .._budget import check_array_bytes
    from ..plan.store import plan_rows
    return check_array_bytes(plan_rows(path, manifest), int(f), 8, f"features of width f = {int(f)}", option=option,
                             copies=REPLAY_COPIES)


def _range_of(A) -> tuple[int, int]:
    """(shift, reach) for a replay that stays inside float64 whatever A's
    values: ``reach`` = ceil(log2(max_i sum_j |A_ij|)) (0 for an empty or
    all-zero A), and H is scaled by 2^-shift (shift = reach - 16 when that
    is positive, else 0) so every |A @ H| stays far below the float64
    maximum — a correct plan is never called invalid because its values
    overflow a replay. Scaling by a power of two changes no rounding."""
    if A.nnz == 0:
        return 0, 0
    a = np.abs(A.data)
    amax = float(a.max())
    if not np.isfinite(amax) or amax == 0.0:
        return 0, 0
    rows = sp.csr_matrix((a / amax, A.indices, A.indptr), shape=A.shape).sum(axis=1)
    reach = int(np.ceil(np.log2(amax) + np.log2(max(float(rows.max()), 1.0))))
    return max(reach - 16, 0), reach


def _result(path, m, graph, rep) -> dict:
    ok = all(c["ok"] for c in rep.checks)
    return {"plan": str(Path(path)), "ok": ok, "layout": m["layout"], "ranks": m["ranks"], "k": m["k"],
            "n": m["graph"]["n"], "nnz": m["graph"]["nnz"], "graph_checked": graph is not None,
            "backward": m.get("backward"), "checks": rep.checks}


def replay_backward(plan: Plan, G: np.ndarray) -> np.ndarray:
    """``A^T @ G`` through the plan's backward program (LocalComm)."""
    from .spmm import replay
    return replay(plan, G, "backward")


def __getattr__(name):
    if name == "replay":
        from .spmm import replay
        return replay
    raise AttributeError(name)


def _rebuild(plan: Plan):
    """(A as scipy CSR, nonzeros multiplied, pattern?) reassembled from the forward program."""
    n = plan.part.size
    _, trip = _id_walk(plan, "forward", n)
    A, seen = _matrix(trip, n)
    pattern = not any("data" in st["arrays"] for st in program_steps(plan.manifest, "forward")
                      if "data" in step_op(st).optional_arrays)
    return A, seen, pattern
