"""PyG data to a :class:`~partplan.Graph` (the io layer's half of
:mod:`partplan.interop.pyg`): what the ``.pt`` reader and :func:`partplan.from_pyg`
share. PyG's convention: with ``flow="source_to_target"`` the edge
``edge_index[:, e] = (j, i)`` is the entry ``A[i, j]`` (row = target)."""
from __future__ import annotations

from typing import Any, Literal

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
    shape = tuple(getattr(a, "shape", ()))
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return a, "edge_attr"
    raise GraphFormatError(f"edge_attr has shape {shape}, not one weight per edge; pass weight=None to "
                           f"build the unweighted graph, or weight='<field>' naming a 1-D weight field",
                           source, field="edge_attr")


def from_pyg(data: Any, *, flow: Flow = "source_to_target", weight: str | None = "auto",
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
    weight : "auto" (``edge_weight`` if present, else ``edge_attr`` when it
        holds one value per edge: shape (E,) or (E, 1); a wider ``edge_attr``
        is an error rather than silently dropped), a field name, or None
        (unweighted pattern).
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
    try:
        return Graph.from_edge_index(ei, n, edge_weight=w, flow=flow, name=name, source=src)
    except GraphFormatError as exc:
        if field and field != "edge_weight" and exc.field == "edge_weight":  # name the field it came from
            raise GraphFormatError(exc.problem.replace("edge_weight", field), src, field=field) from None
        raise
