"""PyG data to a :class:`~partplan.Graph` (the io layer's half of
:mod:`partplan.interop.pyg`): what the ``.pt`` reader and :func:`partplan.from_pyg`
share. PyG's convention: with ``flow="source_to_target"`` the edge
``edge_index[:, e] = (j, i)`` is the entry ``A[i, j]`` (row = target)."""
from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import GraphFormatError, OptionError
from ..graph import Graph, _numpy_of

Flow = Literal["source_to_target", "target_to_source"]


def _attr(data: Any, key: str):
    """``data.key`` or ``data[key]`` (a PyG Data, a namespace or a dict), else None."""
    if isinstance(data, dict):
        return data.get(key)
    try:
        return getattr(data, key, None)
    except Exception:  # PyG may raise on a missing attribute in odd storages
        return None


def _weights(data: Any, weight: str | None, source) -> tuple[Any, str | None]:
    """The edge weights picked by ``weight`` and the field they came from."""
    if weight is None:
        return None, None
    if weight != "auto":
        w = _attr(data, weight)
        if w is None:
            raise GraphFormatError(f"no edge weights in field {weight!r}", source, field=weight)
        return w, weight
    w = _attr(data, "edge_weight")
    if w is not None:
        return w, "edge_weight"
    a = _attr(data, "edge_attr")
    if a is None:
        return None, None
    shape = tuple(a.shape) if hasattr(a, "shape") else np.shape(a)   # a list or tuple too, as a named field is read
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return a, "edge_attr"
    raise GraphFormatError(f"edge_attr has shape {shape}, not one weight per edge; read no weights "
                           f"(weight=None, the default; CLI: no --weight), or name a 1-D weight field "
                           f"(weight='<field>'; CLI: --weight FIELD)", source, field="edge_attr")


def check_tensor_sizes(ei, n: int | None, w, src) -> None:
    """Before any graph is built from ``edge_index`` ``ei`` (2 × E), ``n``
    and weights ``w``: dense (strided) tensors on a real device only —
    sparse, meta or quantized tensors are refused —, integer ids, and the
    vertices (``n``, else the largest id + 1: one vectorized max) and edges
    within the memory budget (:func:`partplan._budget.check_budget`).
    One GraphFormatError naming the field."""
    from ._common import check_budget, graph_bytes
    for field, t in (("edge_index", ei), ("edge_weight", w)):
        if t is None or not hasattr(t, "layout"):
            continue
        import torch
        if t.layout != torch.strided or getattr(t, "is_meta", False) or getattr(t, "is_quantized", False):
            kind = "meta" if getattr(t, "is_meta", False) else str(t.layout).replace("torch.", "")
            raise GraphFormatError(f"{field} is a {kind} tensor; a graph file holds dense tensors", src,
                                   field=field)
    shape = tuple(getattr(ei, "shape", ()))
    if len(shape) != 2 or 2 not in shape[:1]:
        return   # Graph.from_edge_index names the shape
    dt = str(getattr(ei, "dtype", ""))
    if any(k in dt for k in ("float", "complex", "bool")):
        raise GraphFormatError(f"edge_index must hold integer ids, got {dt}", src, field="edge_index")
    e = int(shape[1])
    if n is None and e:
        top = int(ei.max())
        if top >= 1 << 62:
            raise GraphFormatError(f"vertex id {top} is beyond the ids a graph can have", src, field="edge_index")
        n, what = top + 1, f"the largest id in edge_index ({top}) + 1"
    else:
        what = "num_nodes"
    if n is not None:
        if n >= 1 << 62:
            raise GraphFormatError(f"num_nodes = {n} is beyond the vertices a graph can have", src,
                                   field="num_nodes")
        check_budget(graph_bytes(n, e, weighted=w is not None), src, f"a graph of {n} vertices ({what}) and "
                     f"{e} edges", field="num_nodes" if what == "num_nodes" else "edge_index")


def edge_index_array(data: Any, where: str | None = None) -> "np.ndarray":
    """``edge_index`` of ``data`` (a PyG Data, a dict, or the tensor / array
    itself) as an int64 numpy (2, E) array, checked BEFORE it is copied: a
    dense (strided) tensor on a real device (a sparse tensor cannot become
    numpy; a meta tensor claims storage it does not have, and copying it to
    the CPU allocates all of it), integer ids, shape (2, E), E within the
    memory budget. One GraphFormatError naming the field. What every entry
    that takes a Data uses (``from_pyg``, ``plan_from_pyg``, the ``.pt``
    reader, and ``partplan.nn.Halo``'s edge list)."""
    ei = _attr(data, "edge_index") if not hasattr(data, "shape") else data
    if ei is None:
        raise GraphFormatError(f"{type(data).__name__} has no edge_index", where, field="edge_index")
    check_tensor_sizes(ei, 0, None, where)   # layout, device, dtype; n = 0: no max over the ids
    shape = tuple(getattr(ei, "shape", ()))
    if len(shape) != 2 or shape[0] != 2:
        raise GraphFormatError(f"edge_index must have shape (2, E), got {shape}", where, field="edge_index")
    from ._common import check_budget
    check_budget(16 * int(shape[1]), where, f"edge_index of {int(shape[1])} edges", field="edge_index")
    a = _numpy_of(ei)
    if a.dtype.kind not in "iu":
        raise GraphFormatError(f"edge_index must hold integer ids, got {a.dtype}", where, field="edge_index")
    return a.astype(np.int64, copy=False)


def from_pyg(data: Any, *, flow: Flow = "source_to_target", weight: str | None = None,
             name: str = "graph", source: str | os.PathLike | None = None) -> Graph:
    """The matrix ``A`` of a PyG ``Data`` (or anything with ``edge_index``).

    Parameters
    ----------
    data : a ``torch_geometric.data.Data``, or any object / dict with
        ``edge_index`` (2 × E ints, torch or numpy), optional ``num_nodes``
        (default ``max id + 1``; PyG's own inference from ``x`` is used when
        ``data`` is a Data) and optional 1-D weights.
    flow : "source_to_target" (PyG's default: row = target) or
        "target_to_source".
    weight : None (default: every edge weighs 1, duplicates summed; no field
        is read as weights, ``edge_attr`` of any width is left alone), a
        field name holding one weight per edge (e.g. "edge_weight",
        "edge_attr": shape (E,) or (E, 1)), or "auto" (``edge_weight`` if
        present, else ``edge_attr`` when it holds one value per edge).
    name : the graph's label; source : file name used in error messages.

    Returns
    -------
    Graph with ``A[target, source]`` = summed edge weight (dimensionless).
    """
    src = None if source is None else str(source)
    ei = _attr(data, "edge_index")
    if ei is None:
        raise GraphFormatError(f"{type(data).__name__} has no edge_index", src, field="edge_index")
    n = _attr(data, "num_nodes")
    if n is not None:
        n_arr = _numpy_of(n)
        if n_arr.ndim != 0 or n_arr.dtype.kind not in "iu":
            raise GraphFormatError(f"num_nodes must be an integer, got {n!r}", src, field="num_nodes")
        n = int(n_arr)
    w, field = _weights(data, weight, src)
    check_tensor_sizes(ei, n, w, src)
    try:
        return Graph.from_edge_index(ei, n, edge_weight=w, flow=flow, name=name, source=src)
    except GraphFormatError as exc:
        if field and field != "edge_weight" and exc.field == "edge_weight":  # name the field it came from
            raise GraphFormatError(exc.problem.replace("edge_weight", field), src, field=field) from None
        raise
