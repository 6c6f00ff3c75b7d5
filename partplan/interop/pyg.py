"""Bridge from PyTorch Geometric: ``Data`` -> :class:`~partplan.graph.Graph` -> plan.

PyG's convention is kept exactly: with the default ``flow="source_to_target"``
an edge ``edge_index[:, e] = (j, i)`` sends ``x_j`` to target ``i``, so the plan's
``Z = A @ H`` has ``A[i, j] = edge_weight[e]`` and equals a ``MessagePassing``
layer with ``aggr="add"`` whose message is ``edge_weight.view(-1, 1) * x_j``
(duplicate edges summed, as PyG's scatter-add does). See
:meth:`partplan.graph.Graph.from_edge_index`.

Edge weights are read only when asked: ``weight="edge_weight"``,
``weight="edge_attr"`` (one value per edge) or any other field name; by default
(``weight=None``) every edge weighs 1 and ``edge_attr`` of any shape is left to
the layers (``Halo.edge_ids`` and the PyG export carry it by edge id).

torch_geometric itself is not imported here: any object with ``edge_index``
(and optionally ``num_nodes`` and weight fields) works.

Examples
--------
>>> import numpy as np
>>> from types import SimpleNamespace
>>> d = SimpleNamespace(edge_index=np.array([[0, 1], [1, 2]]), num_nodes=3)
>>> from_pyg(d).nnz
2
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from ..errors import GraphFormatError, OptionError
from ..io._pyg import Flow, _attr
from ..io._pyg import from_pyg as _from_pyg

__all__ = ["from_pyg", "plan_from_pyg", "plan_graph"]


def from_pyg(data: Any, *, flow: Flow = "source_to_target", weight: str | None = None,
             name: str = "graph", source: str | os.PathLike | None = None):
    """The matrix ``A`` of a PyG ``Data`` (or anything with ``edge_index``).

    Parameters
    ----------
    data : a ``torch_geometric.data.Data``, or any object / dict with
        ``edge_index`` (2 × E ints, torch or numpy) and optional ``num_nodes``.
    flow : "source_to_target" (PyG's default: row = target) or "target_to_source".
    weight : None (default: every edge weighs 1, duplicates summed), or the
        field holding one weight per edge, e.g. "edge_weight" or "edge_attr"
        (shape (E,) or (E, 1)); "auto" takes ``edge_weight``, else a
        one-column ``edge_attr``.
    name : the graph's label; source : file name used in error messages.

    Returns
    -------
    Graph with ``A[target, source]`` = summed edge weight (dimensionless).
    """
    return _from_pyg(data, flow=flow, weight=weight, name=name, source=source)


def _edge_array(data: Any) -> np.ndarray:
    from ..graph import _numpy_of
    ei = _attr(data, "edge_index")
    if ei is None:
        raise GraphFormatError(f"{type(data).__name__} has no edge_index", field="edge_index")
    return np.asarray(_numpy_of(ei))


def remaining_self_loops(data: Any, weight: str | None) -> dict:
    """``edge_index`` (and the weights named by ``weight``) with PyG's
    ``add_remaining_self_loops`` rule for the loops already there: every vertex
    keeps at most one self loop, weighing what its last listed loop weighs (1
    unweighted); edges between distinct vertices are kept as they are
    (duplicates summed later, as PyG's scatter-add does). The missing loops are
    added with weight 1 by the normalization itself."""
    from ..graph import _numpy_of
    ei = _edge_array(data)
    out = {"edge_index": ei, "num_nodes": _attr(data, "num_nodes")}
    w = None
    if weight is not None:
        w = _attr(data, weight)
        if w is None:
            raise GraphFormatError(f"no edge weights in field {weight!r}", field=weight)
        w = np.asarray(_numpy_of(w))
        e = ei.shape[1] if ei.ndim == 2 else None
        if e is not None and not (w.shape == (e,) or w.shape == (e, 1)):
            raise GraphFormatError(f"{weight} must have shape ({e},) (one weight per edge), got {tuple(w.shape)}",
                                   field=weight)
        out[weight] = w   # under its own name: from_pyg's errors name the field
    if ei.ndim != 2 or ei.shape[0] != 2 or ei.shape[1] == 0:
        return out                      # from_edge_index reports a malformed array
    loop = ei[0] == ei[1]
    if not loop.any():
        return out
    at = np.flatnonzero(loop)
    v = ei[0, at]
    # the last loop of each vertex: reversed order, first occurrence
    _, first = np.unique(v[::-1], return_index=True)
    keep_loops = np.sort(at[::-1][first])
    keep = np.concatenate([np.flatnonzero(~loop), keep_loops])
    keep.sort()
    out["edge_index"] = ei[:, keep]
    if w is not None and w.shape[:1] == (ei.shape[1],):
        out[weight] = w[keep]
    return out


def plan_graph(data: Any, *, normalize: str | None = None, flow: Flow = "source_to_target",
               weight: str | None = None, name: str = "graph", source: str | os.PathLike | None = None):
    """The :class:`~partplan.graph.Graph` :func:`plan_from_pyg` partitions for
    ``data`` with these options (no partition is computed): :func:`from_pyg`
    (weights only when ``weight`` names a field), after PyG's
    ``add_remaining_self_loops`` rule for the loops already there when
    ``normalize`` is "gcn" or "mean" (:func:`remaining_self_loops`). Its
    :attr:`~partplan.graph.Graph.matrix_fingerprint` is the plan's
    ``graph.source_fingerprint``; ``partplan partition data.pt`` reads a
    ``.pt`` Data through this function too, so both build the same matrix."""
    if normalize not in (None, "none", "gcn", "mean"):
        raise OptionError(f"normalize must be None, 'gcn' or 'mean', not {normalize!r}")
    if normalize in (None, "none"):
        return from_pyg(data, flow=flow, weight=weight, name=name, source=source)
    try:
        src = remaining_self_loops(data, weight)
    except GraphFormatError as exc:
        raise GraphFormatError(exc.problem, None if source is None else str(source), field=exc.field) from None
    return from_pyg(src, flow=flow, weight=weight, name=name, source=source)


def _directed_partition(g, k: int, **options):
    """The partition of a directed graph that sends the fewest rows forward plus
    backward (what one training step sends) of two candidates: the joint
    hypergraph (nets of A and Aᵀ together) and METIS's graph model (the edge cut
    of A + Aᵀ). Ties go to the joint model."""
    from ..metrics import analyze
    from ..partition.api import partition as run_partition
    best, best_sum = None, None
    for kw in ({"model": "hypergraph", "nets": "joint"}, {"model": "graph"}):
        part = run_partition(g, k, **kw, **options)
        if getattr(part, "layout_params", None):         # 1.5D / 2D: one candidate, the joint model
            return part
        st = analyze(g, part.part, k, backward=True)
        total = int(st.total_volume) + int(st.backward.total_volume)
        if best is None or total < best_sum:
            best, best_sum = part, total
    return best


def _progress(msg: str, t0: float, quiet: bool) -> None:
    if not quiet:
        print(f"partplan: {msg} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)


def _layout_class(spec):
    from ..layouts import layout_class
    return layout_class(spec)


def plan_from_pyg(data: Any, k: int, *, normalize: str | None = None, out: str | os.PathLike | None = None,
                  flow: Flow = "source_to_target", weight: str | None = None, f: int = 128,
                  dtype: str = "float32", progress: bool | None = None, shares: bool = False,
                  balance: Any = "nnz", **partition_options):
    """Partition a PyG graph for ``k`` ranks and build its communication plan.

    ``A`` is :func:`from_pyg` (``flow``, ``weight``: edge weights only when
    named, e.g. ``weight="edge_attr"``); the partition is
    :func:`partplan.partition` (``partition_options``: model, backend,
    objective, layout, imbalance, seed, ownership, preset, ...); the plan is
    :func:`partplan.build_plan` with ``normalize``:

    * None — ``Z = A @ H``: PyG's ``aggr="add"`` over the user's edges
      (duplicates summed, self loops as listed);
    * "gcn" — ``D^-1/2 (A + I) D^-1/2``, GCNConv's ``gcn_norm``; "mean" —
      ``D^-1 (A + I)``. Both follow ``add_remaining_self_loops``: each vertex
      has exactly one self loop, weighing its last listed loop's weight (1
      unweighted) or 1 when it had none; duplicated edges between distinct
      vertices are summed.

    On a directed graph (A not symmetric) the default partition is the one of
    two candidates that sends the fewest rows forward plus backward (what a
    training step sends): the joint hypergraph (``model="hypergraph",
    nets="joint"``) and METIS's graph model; the manifest records the model
    used (``model``, and ``params.nets`` for the hypergraph). Name a ``model``
    or ``backend`` to choose. ``f`` / ``dtype`` are the feature width
    (columns of H) and element type the plan is costed for (bytes = rows × f ×
    itemsize). With ``out`` the plan is written there (a ``.plan`` folder).
    ``progress``: a line with the elapsed seconds after each step (default:
    when a step takes over 2 s). ``shares=True`` (needs ``out``, a 1D plan) also
    writes each rank's share of ``data`` beside the plan (its rows of ``x``,
    ``y``, the masks and every node field; its incoming edges, their
    ``edge_attr`` rows by edge id; :mod:`partplan.nn.shares`), so that every
    rank builds ``partplan.nn.Halo(out)`` or ``partplan.nn.NeighborLoader(out,
    ...)`` from its own share without loading the graph.

    ``balance``: what the partition balances per rank — "nnz" (default: each
    row's nonzeros, the SpMM's compute), "rows" (one per vertex), "memory"
    (``partplan.nn.shares.memory_weights(data)``, as ``--balance memory``), or n
    non-negative integers, one per vertex (e.g. the bytes a rank holds for the
    vertex when it trains from shares: its features plus its in-edges' share
    and activations, ``partplan.nn.shares.memory_weights``).

    Returns the :class:`~partplan.plan.Plan`.
    """
    from ..partition.api import partition as run_partition
    from ..plan import build_plan, write_plan
    if normalize not in (None, "gcn", "mean"):
        raise OptionError(f"normalize must be None, 'gcn' or 'mean', not {normalize!r}")
    from .._args import check_bool
    shares = check_bool("shares", shares)
    progress = None if progress is None else check_bool("progress", progress)
    if shares and out is None:
        raise OptionError("shares=True writes each rank's share beside the plan: give out=PATH")
    if shares and flow != "source_to_target":
        raise OptionError(f"shares=True: shares, Halo and NeighborLoader read PyG's source_to_target flow (a row "
                          f"per edge target), not flow={flow!r}: leave flow at its default")
    if shares and (not _layout_class(partition_options.get("layout", "1d")).halo
                   or partition_options.get("ownership", "conformal") != "conformal"):
        raise OptionError("shares=True needs a 1D conformal plan (Halo's rows and edges): leave layout and "
                          "ownership at their defaults")
    if out is not None:         # where the plan goes, before the partition (which may take long)
        from ..plan.store import check_plan_target
        check_plan_target(out)
    t0 = time.perf_counter()
    if isinstance(balance, str) and balance == "memory":     # the CLI's --balance memory
        from ..nn.shares import memory_weights
        balance = memory_weights(data)
    g = plan_graph(data, normalize=normalize, flow=flow, weight=weight).with_balance(balance)
    if shares:      # the fields the shares carry, before the partition and before anything at ``out`` changes
        from ..nn.shares import check_share_data
        check_share_data(data, g.n)
    t1 = time.perf_counter()
    if "model" not in partition_options and "backend" not in partition_options and not g.is_symmetric():
        part = _directed_partition(g, k, f=f, dtype=dtype, **partition_options)
    else:
        part = run_partition(g, k, f=f, dtype=dtype, **partition_options)
    if progress or (progress is None and time.perf_counter() - t1 > 2.0):
        _progress(f"partitioned {g.n:,} vertices for {k} ranks", t0, False)
    t1 = time.perf_counter()
    plan = build_plan(g, part, normalize=normalize, f=f, dtype=dtype)
    if out is not None:
        write_plan(plan, out)
        if shares:
            from ..nn.shares import write_shares
            write_shares(out, data)
            from ..plan.store import read_manifest
            plan.manifest = read_manifest(out)
    if progress or (progress is None and time.perf_counter() - t1 > 2.0):
        _progress("plan built" + (f" and written to {out}" if out is not None else ""), t0, False)
    return plan
