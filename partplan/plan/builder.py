"""Build a communication :class:`Plan` (an exchange program) from a graph and a partition.

The layout object (:mod:`partplan.layouts`) makes the forward program of
``Z = A @ H``; the backward pass ``A^T @ G`` reuses it when A equals its
transpose (pattern and values) and ownership is conformal, else it is the same
layout's program for ``A^T`` (``bwd.*`` arrays). Every figure in the manifest
is cross-checked: the plan's count matrix must equal the analyzer's volume
matrix for the same partition (:meth:`Layout.volumes`), or building fails.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PartplanError, PlanError
from ..graph import Graph
from ..io.trust import plain_name
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, dtype_bytes, dtype_name
from ..parts import as_partition
from ..program.core import Group, Program, matrix_to_pairs, step_matrix
from ..program.exchange import perm_by
from ..program.plan import Plan, RankPlan
from ..program.schema import FORMAT, FORMAT_VERSION
from ..program.steps import STEPS
from ..graph import check_graph


# ----------------------------------------------------------------------------- helpers
def values_symmetric(graph: Graph) -> bool:
    """A == A^T, pattern and values (then the backward pass equals the forward)."""
    if not graph.is_symmetric():
        return False
    if graph.data is None:
        return True
    return bool(np.array_equal(graph.data, graph.transpose().data))


def _plain_values(obj):
    """``obj`` with numpy scalars (np.int64(3), np.float32(0.5), np.bool_) as the Python numbers they
    hold, in nested dicts and lists too: what a user's meta may carry; anything else as it is."""
    if isinstance(obj, dict):
        return {key: _plain_values(val) for key, val in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain_values(val) for val in obj]
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return obj.item()
    return obj


def _non_str_key(obj):
    """The first dict key in ``obj`` (nested dicts and lists included) that is not a str, else None."""
    if isinstance(obj, dict):
        for key, val in obj.items():
            if not isinstance(key, str):
                return key
            found = _non_str_key(val)
            if found is not None:
                return found
    elif isinstance(obj, (list, tuple)):
        for val in obj:
            found = _non_str_key(val)
            if found is not None:
                return found
    return None


def _unpack(graph, part_or_partition, k, layout, owner, meta):
    """Accept a plain part vector or the planner's Partition (duck-typed)."""
    info = {}
    if hasattr(part_or_partition, "part") and hasattr(part_or_partition, "layout"):
        P = part_or_partition
        fp = getattr(P, "graph_fingerprint", None)
        if fp and fp != graph.fingerprint:
            raise PlanError(f"the partition was computed for another graph (fingerprint {fp[:16]}…, "
                            f"graph {graph.name!r} has {graph.fingerprint[:16]}…)")
        part = P.part
        if layout is None:
            layout = P.layout_obj if hasattr(P, "layout_obj") else P.layout
        # its parts (row blocks) are known exactly: the ranks follow from them and the layout
        info["_parts"] = int(P.row_blocks) if hasattr(P, "row_blocks") else None
        if owner is None:
            owner = getattr(P, "owner", None)
        if (getattr(P, "info", None) or {}).get("provenance", True):   # (a plan of a bare partition has none)
            for name in ("model", "backend", "objective"):
                info[name] = getattr(P, name, None)
            params = dict(getattr(P, "params", {}) or {})
            info["seed"] = params.get("seed")
            info["params"] = params
    else:
        part = part_or_partition
    if meta:        # the manifest's JSON, as every reader reads it: no NaN / inf, nothing but JSON values
        import json
        try:
            meta = _plain_values(meta) if isinstance(meta, dict) else meta
            json.dumps(meta, allow_nan=False)
        except RecursionError:      # a dict that holds itself
            raise PlanError("meta: it holds itself (a circular reference); the plan's manifest holds JSON "
                            "values only") from None
        except (TypeError, ValueError) as exc:
            raise PlanError(f"meta: {exc} (the plan's manifest holds JSON values only)") from None
        bad = _non_str_key(meta)
        if bad is not None:   # json turns 1 into "1", but the manifest's sorted keys cannot mix 1 and "k"
            raise PlanError(f"meta: key {bad!r} is not a string (the plan's manifest holds JSON objects, whose "
                            f"keys are strings)")
    info.update(meta or {})
    return part, k, layout or "1d", owner, info


def _check_owner(graph: Graph, part, owner, k):
    """owner[j] must be part[j] or a part with a nonzero in column j."""
    bad_mask = owner != part
    if not bad_mask.any():
        return
    from ..metrics.volume1d import needed_pairs
    j, r = needed_pairs(graph.indptr, graph.indices, part, k, graph.n)
    ok = np.zeros(graph.n, dtype=bool)
    hit = owner[j] == r
    ok[j[hit]] = True
    ok |= ~bad_mask
    if not ok.all():
        v = int(np.flatnonzero(~ok)[0])
        raise PlanError(f"owner[{v}] = {int(owner[v])} is not in the connectivity set of column {v} "
                        f"(no row of part {int(owner[v])} reads it, and part[{v}] = {int(part[v])})")


def _program_json(prog: Program, groups: list[Group]) -> dict:
    steps = []
    for st in prog.steps:
        st = dict(st)
        if STEPS[st["op"]].pairs:
            st["pairs"] = matrix_to_pairs(step_matrix(prog, st, groups))
        steps.append(st)
    return {"prefix": prog.prefix, "steps": steps}


def _crosscheck(prog: Program, groups, stats, what: str):
    """The plan's count matrix must be the analyzer's volume matrix."""
    vol = prog.pairs(groups)
    if not np.array_equal(vol, np.asarray(stats.volume)):
        diff = np.argwhere(vol != stats.volume)[0]
        raise PlanError(f"internal error: the {what} plan sends {int(vol[tuple(diff)])} rows from rank "
                        f"{diff[0]} to rank {diff[1]}, the analyzer counts {int(stats.volume[tuple(diff)])}")


def plan_layout(layout, k: int | None, parts: int, *, exact: bool = True, source: str | None = None):
    """The :class:`~partplan.layouts.Layout` of the plan of a partition with
    ``parts`` parts (row blocks). Without ``k`` the ranks follow from the
    layout and the parts: 1d, 2d (R × C = parts) and routed layouts have one
    rank per part, 1.5d:c has parts × c. A given ``k`` must agree: the layout
    on k ranks must have exactly ``parts`` row blocks (``exact``, a partition
    whose part count is known: a saved partplan partition or a plan) or at
    least ``parts`` (a bare part array, whose count is only max(part) + 1).
    Disagreement is one :class:`PlanError` naming the ranks that would agree (and the partition
    file ``source`` when given).

    >>> plan_layout("1.5d:2", None, 16).ranks
    32
    >>> plan_layout("2d", None, 16).spec
    '2d:4x4'
    """
    from ..layouts import Layout, check_spec, parse_layout
    if not isinstance(layout, Layout):
        check_spec(layout)                        # an unknown layout is its own error
    if k is None:
        try:
            return parse_layout(layout, row_blocks=int(parts))
        except PartplanError as exc:
            raise PlanError(f"layout {getattr(layout, 'spec', layout)} does not fit a partition of {parts} "
                            f"parts: {exc}") from None
    the = "the partition" if source is None else f"the partition {source}"
    if isinstance(layout, Layout) and layout.ranks != int(k):    # a saved partition's or a plan's own layout
        raise PlanError(f"k = {k} (-k) disagrees with {the}: its layout {layout.spec} has {layout.ranks} "
                        f"ranks ({layout.row_blocks} row blocks); use k = {layout.ranks} or leave k out")
    lay = parse_layout(layout, int(k))           # k that the layout itself refuses: the layout's own error
    if lay.row_blocks == parts if exact else lay.row_blocks >= parts:
        return lay
    spec = layout.spec if isinstance(layout, Layout) else str(layout)
    try:
        want = f"k = {parse_layout(spec, row_blocks=int(parts)).ranks} or leave k out"
    except PartplanError:
        want = f"a layout with {parts} row blocks"
    raise PlanError(f"k = {k} (-k) disagrees with {the}: it has {parts} parts (row blocks), and layout {spec} "
                    f"on {k} ranks has {lay.row_blocks} row blocks (ranks = parts for 1d / 2d / routed, "
                    f"parts x c for 1.5d:c); use {want}")


# ----------------------------------------------------------------------------- public API
def build_plan(graph: Graph, part_or_partition, k: int | None = None, *, layout=None,
               owner=None, f: int = 128, dtype: str = "float32", meta: dict | None = None,
               backward: bool | None = None, alpha: float = DEFAULT_ALPHA_S,
               beta: float = DEFAULT_BETA_S_PER_BYTE, normalize: str | None = None,
               progress=None) -> Plan:
    """Build the exchange program of SpMM ``Z = A @ H`` for a partition.

    Parameters
    ----------
    graph : the matrix A (n × n).
    part_or_partition : int[n] row block of each vertex, or a planner
        ``Partition`` (its part, ranks, layout, owner, model, backend,
        objective and params are used).
    k : number of **ranks** (processes). Default: from the layout and the
        partition's parts (a Partition's row blocks, else ``max(part) + 1``):
        ranks = parts for 1d / 2d / routed, parts × c for 1.5d:c
        (:func:`plan_layout`); a given k must agree with them.
    layout : "1d" (default), "1.5d:c", "2d:RxC", "2d" or a :class:`partplan.layouts.Layout`.
    owner : int[n] "decoupled" ownership (1d only): rank holding row j of H;
        must be in the connectivity set of column j. None = conformal.
    f, dtype : feature width (columns of H) and element type the plan is costed
        for (bytes = rows × f × itemsize); recorded in the manifest.
    meta : extra JSON-able manifest fields (model, backend, objective, seed, ...).
    backward : plan ``A^T @ G`` as its own program; default when A is not
        equal to its transpose (pattern or values) or ownership is decoupled.
        Otherwise the backward pass runs the forward program.
    normalize : None, "gcn" (``D^-1/2 (A+I) D^-1/2``) or "mean" (``D^-1 (A+I)``):
        the plan multiplies that matrix (:func:`partplan.nn.normalize_adjacency`);
        the manifest records ``normalize`` and the input graph's matrix
        fingerprint (:attr:`partplan.graph.Graph.matrix_fingerprint`: pattern
        and values) as ``graph.source_fingerprint``. A partition is checked against the input graph.
    progress : None (silent) or a callable ``progress(what, done, total)``
        called after each stage (checks, forward program, backward program,
        rank shards) — e.g. :class:`partplan.plan.store.Progress`, a heartbeat
        on stderr that the CLI silences with ``-q``.

    Returns a :class:`Plan` (write it with :func:`partplan.plan.write_plan`).

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)   # path 0-1-2-3
    >>> plan = build_plan(g, np.array([0, 0, 1, 1]))
    >>> [s["op"] for s in plan.steps("forward")]
    ['copy', 'gather', 'alltoallv', 'spmm']
    >>> plan[0]["fwd.1.idx"].tolist(), plan[0]["fwd.2.recv_ids"].tolist()  # rank 0 sends H[1], gets H[2]
    ([1], [2])
    """
    check_graph(graph, error=PlanError)
    if not graph.directed and not graph.is_symmetric():   # the manifest would say "undirected" of it
        raise PlanError(f"{plain_name(graph.name)}: the graph is marked undirected (directed=False) but its pattern "
                        f"is not symmetric (some A[i, j] has no A[j, i]): build it with directed=True, or "
                        f"symmetrize it (graph.normalize(symmetrize=True))")
    from .._args import check_bool, check_int
    from ..layouts import parse_layout
    k = check_int("ranks (k)", k, lo=1, none_ok=True, error=PlanError)
    if meta is not None and not isinstance(meta, dict):
        raise PlanError(f"meta must be a dict of manifest fields, got {type(meta).__name__}")
    if progress is not None and not callable(progress):
        raise PlanError(f"progress must be None or a callable progress(what, done, total), got {progress!r}")
    if backward is not None:
        backward = check_bool("backward", backward, error=PlanError)

    t0 = time.perf_counter()
    part, k, layout, owner, info = _unpack(graph, part_or_partition, k, layout, owner, meta)
    source_fp = graph.matrix_fingerprint   # values included: a weighted and an unweighted A differ
    if normalize is not None:
        from ..models.normalize import check_normalize, normalize_adjacency
        normalize = check_normalize(normalize)
        graph = normalize_adjacency(graph, normalize)
    if not isinstance(f, (int, np.integer)) or f < 1:
        raise PlanError(f"f (feature width) must be an integer >= 1, got {f!r}")
    dtype_bytes(dtype)
    parts = info.pop("_parts", None)
    exact = parts is not None
    if parts is None:
        part, parts = as_partition(part, graph.n)
    lay = plan_layout(layout or "1d", k, parts, exact=exact, source=(meta or {}).get("partition_file"))
    part, _ = as_partition(part, graph.n, lay.row_blocks)
    lay.check_part(part)
    if owner is not None:
        if not lay.supports_owner:
            raise PlanError(f"decoupled ownership (owner) is not planned for layout {lay.spec}")
        owner, _ = as_partition(owner, graph.n, lay.ranks, source="owner")
        if np.array_equal(owner, part):
            owner = None
        else:
            _check_owner(graph, part, owner, lay.ranks)
    same = values_symmetric(graph) and owner is None
    if backward is None:
        backward = not same
    t1 = time.perf_counter()
    tick = progress or (lambda what, done, total: None)
    tick("building plan", 1, 4)
    groups = lay.groups()
    cost = {"alpha": alpha, "beta": beta}
    fwd = lay.program(graph, part, owner=owner, prefix="fwd")
    st = lay.volumes(graph, part, owner=owner, f=f, dtype=dtype, **cost)
    _crosscheck(fwd, groups, st, "forward")
    programs = {"forward": _program_json(fwd, groups)}
    tick("building plan", 2, 4)
    bwd = bst = None
    if backward:
        T = graph.transpose()
        bwd = lay.program(T, part, prefix="bwd")
        bst = lay.volumes(T, part, f=f, dtype=dtype, **cost)
        _crosscheck(bwd, groups, bst, "backward")
        programs["backward"] = _program_json(bwd, groups)
        bmode = "separate"
    elif same:
        programs["backward"] = {"same_as": "forward"}
        bmode = "same-as-forward"
    else:
        bmode = "not-planned"
    t2 = time.perf_counter()
    tick("building plan", 3, 4)
    rank_plans = []
    for r in range(lay.ranks):
        arrays = dict(fwd.arrays[r])
        progs = {"forward": {"prefix": "fwd", "buffers": fwd.buffers[r], "writes_output": fwd.writes_output[r]}}
        if bwd is not None:
            arrays.update(bwd.arrays[r])
            progs["backward"] = {"prefix": "bwd", "buffers": bwd.buffers[r],
                                 "writes_output": bwd.writes_output[r]}
        elif bmode == "same-as-forward":
            progs["backward"] = progs["forward"]
        m = {"rank": r, "ranks": lay.ranks, "layout": lay.spec, "format_version": FORMAT_VERSION,
             "graph_fingerprint": graph.fingerprint, "normalize": normalize, "programs": progs}
        rank_plans.append(RankPlan(r, m, arrays))
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "graph": {"fingerprint": graph.fingerprint, "name": plain_name(graph.name), "n": graph.n, "nnz": graph.nnz,
                  "directed": bool(graph.directed), "symmetric": bool(graph.is_symmetric()),
                  "weighted": graph.data is not None, "source_fingerprint": source_fp},
        "normalize": normalize,
        "k": lay.ranks, "ranks": lay.ranks, "row_blocks": lay.row_blocks,
        "layout": lay.spec, "layout_params": lay.params,
        "groups": [g.to_json() for g in groups],
        "programs": programs,
        "ownership": "conformal" if owner is None else "decoupled",
        "backward": bmode,
        "model": info.get("model"), "backend": info.get("backend"), "objective": info.get("objective"),
        "seed": info.get("seed"), "params": info.get("params", {}),
        "f": int(f), "dtype": dtype_name(dtype), "row_bytes": int(f * dtype_bytes(dtype)),
        "topology": info.get("topology"),
        "stats": st.summary(),
        "columns_sorted_within_rows": False,
    }
    if bst is not None:
        manifest["stats_backward"] = bst.summary()
    for key, val in info.items():
        if key not in manifest:
            manifest[key] = val
    perm = perm_by(part if owner is None else owner, lay.row_blocks)
    tick("building plan", 4, 4)
    timings = {"check_s": t1 - t0, "build_s": t2 - t1}
    plan = Plan(manifest, rank_plans, part, owner, perm, st, timings)
    if bst is not None:
        plan.stats_backward = bst
    return plan


__all__ = ["Plan", "RankPlan", "build_plan", "plan_layout", "program_steps", "values_symmetric", "PartplanError"]
