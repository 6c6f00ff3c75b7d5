"""PyTorch ``.pt`` files holding a PyG ``Data`` or an ``edge_index`` tensor.

Loading is safe: ``torch.load(path, weights_only=True)`` with only PyG's data
classes allowed (``Data`` and its storages, via
``torch.serialization.safe_globals``), never an arbitrary pickle. A file that
pickles any other object is refused with one
:class:`~partplan.errors.GraphFormatError` naming the file. The graph is
:meth:`partplan.graph.Graph.from_edge_index` / :func:`partplan.interop.pyg.from_pyg`:
PyG's convention (default ``flow="source_to_target"``: row = target, column
= source; duplicates summed). Read-only: partplan writes no ``.pt`` graphs.
"""
from __future__ import annotations

import os
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailableError, GraphFormatError
from ..graph import Graph

__all__ = ["load_pt", "read_pt", "pyg_safe_globals"]

_REFUSE = ("not a PyG Data or edge_index tensor; refusing to unpickle it (only torch tensors and "
           "torch_geometric Data are loaded, with torch.load(weights_only=True))")


def pyg_safe_globals() -> list:
    """The torch_geometric classes a pickled ``Data`` needs under
    ``weights_only=True`` (empty when torch_geometric is not installed)."""
    try:
        from torch_geometric.data import data as _d
        from torch_geometric.data import storage as _s
    except Exception:  # not installed, or a broken install: tensors still load
        return []
    names = [(_d, "Data"), (_d, "DataEdgeAttr"), (_d, "DataTensorAttr"), (_s, "GlobalStorage"),
             (_s, "NodeStorage"), (_s, "EdgeStorage")]
    out = [getattr(m, n) for m, n in names if hasattr(m, n)]
    try:
        from torch_geometric.edge_index import EdgeIndex  # a tensor subclass edge_index may be
        out.append(EdgeIndex)
    except Exception:
        pass
    return out


def load_pt(path: str | os.PathLike) -> Any:
    """The object in ``path``: a torch tensor or a PyG ``Data`` (safe load).

    Raises :class:`GraphFormatError` for a missing / unreadable file or any
    other pickled object, :class:`BackendUnavailableError` without torch.
    """
    p = Path(path)
    try:
        import torch
    except ImportError:
        raise BackendUnavailableError(f"{p}: reading .pt files needs torch (pip install torch)") from None
    from ._common import open_regular
    fd, _ = open_regular(p)   # a regular file (a FIFO or a pipe never blocks the reader)
    allowed = pyg_safe_globals()
    try:
        with torch.serialization.safe_globals(allowed), os.fdopen(fd, "rb") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # torch's note on a file's pickle protocol: the error says it
            obj = torch.load(fh, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        m = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f" (it pickles {m.group(1)})" if m else ""
        raise GraphFormatError(_REFUSE + what, p) from None
    except Exception as exc:  # noqa: BLE001 - torch's weights-only unpickler also raises IndexError, KeyError, ...
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise GraphFormatError(f"not a readable torch .pt file ({msg})", p) from None
    if isinstance(obj, torch.Tensor):
        return obj
    Data = next((c for c in allowed if c.__name__ == "Data"), None)
    if Data is not None and isinstance(obj, Data):
        if "_store" not in obj.__dict__:   # any attribute of it would raise PyG's RuntimeError
            raise GraphFormatError("holds a PyG Data without its storage (a damaged file, or a Data "
                                   "pickled by an old PyG: save it again with this one)", p)
        return obj
    raise GraphFormatError(f"holds a {type(obj).__name__}: not a PyG Data or edge_index tensor (save a "
                           f"torch_geometric.data.Data, or the (2, E) edge_index tensor itself)", p)


def read_pt(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
            dedupe: bool = True, drop_isolated: bool = False, flow: str = "source_to_target",
            weight: str | None = None, num_nodes: int | None = None) -> Graph:
    """Read a ``.pt`` graph: a PyG ``Data`` (its ``edge_index`` and
    ``num_nodes``, see :func:`partplan.interop.pyg.from_pyg`) or a bare
    ``edge_index`` tensor of shape (2, E) (``num_nodes`` default ``max id + 1``).

    Weights only when named, as :func:`partplan.plan_from_pyg` reads a Data:
    ``weight=None`` (default) gives every edge weight 1 whatever fields the
    Data carries (an ``edge_attr`` of any width is not read);
    ``weight="edge_weight"`` / ``"edge_attr"`` (or any field holding one value
    per edge) weighs the edges by it (CLI: ``--weight FIELD``). Duplicate edges
    are always summed (PyG's scatter-add); ``dedupe=False`` is refused. Then
    normalized like every reader (symmetrize, self_loops, drop_isolated).
    """
    from ._pyg import from_pyg
    if not dedupe:
        raise BackendUnavailableError("the .pt reader always sums duplicate edges (PyG's aggregation); "
                                      "dedupe=False is not supported")
    p = Path(path)
    obj = load_pt(p)
    name = p.name.rsplit(".", 1)[0]
    if hasattr(obj, "edge_index"):
        if num_nodes is not None:
            raise BackendUnavailableError(f"{p}: num_nodes= is only for a bare edge_index tensor; "
                                          f"a Data carries its own")
        g = from_pyg(obj, flow=flow, weight=weight, name=name, source=p)
    else:
        if weight is not None:
            raise GraphFormatError(f"holds a bare edge_index tensor: no field {weight!r} to read edge weights "
                                   f"from (save a torch_geometric Data with that field)", p, field=weight)
        if obj.ndim != 2 or obj.shape[0] != 2:
            raise GraphFormatError(f"a tensor of shape {tuple(obj.shape)} where a graph is expected: a .pt "
                                   f"graph holds a PyG Data or an edge_index tensor of shape (2, E)", p,
                                   field="edge_index")
        from ._pyg import check_tensor_sizes
        check_tensor_sizes(obj, num_nodes, None, str(p))
        g = Graph.from_edge_index(obj, num_nodes, flow=flow, name=name, source=str(p))
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=True, drop_isolated=drop_isolated)
    return g
