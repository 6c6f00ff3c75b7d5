"""Edge arrays to a :class:`~partplan.Graph`: id relabelling and the checked
build shared by the text edge-list reader (:mod:`.edgelist`) and the table
readers (:mod:`.table`: Parquet, CSV)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ..graph import Graph
from ._common import check_budget, graph_bytes


def relabel_ids(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Map the distinct ids of ``src``/``dst`` (>= 0) to 0..n-1 in sorted order.

    Returns (new src, new dst, original id of each new id), the latter None
    when the ids already are exactly 0..n-1. Dense ids (max id within a few
    times the edge count) use a presence bitmap and a cumulative sum, O(n + m);
    sparse ids (e.g. 64-bit hashes) use ``np.unique`` (a sort)."""
    if src.size == 0:
        return src, dst, None
    top = int(max(src.max(), dst.max())) + 1
    if top <= 4 * (src.size + dst.size) + 1024:
        present = np.zeros(top, dtype=bool)
        present[src] = True
        present[dst] = True
        if present.all():
            return src, dst, None
        new_id = np.cumsum(present, dtype=np.int64) - 1
        return new_id[src], new_id[dst], np.flatnonzero(present).astype(np.int64)
    ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    inv = inv.astype(np.int64, copy=False).reshape(-1)
    return inv[: src.size], inv[src.size:], ids.astype(np.int64)


def edges_to_graph(src, dst, w, path, *, n=None, relabel=True, symmetrize=False, self_loops="keep",
                   dedupe=True, drop_isolated=False, name=None) -> Graph:
    """Checked edge arrays (ids >= 0, weights finite and >= 0) -> normalized
    Graph. Relabelling by :func:`relabel_ids` (``ids`` None when it is the
    identity); CSR building and normalization by :class:`Graph` (scipy)."""
    nm = name or _stem(path)
    ids = None
    if relabel:
        src, dst, ids = relabel_ids(src, dst)
    top = int(max(src.max(), dst.max())) + 1 if src.size else 0
    if ids is not None:
        n = ids.size
    elif n is None:
        n = top
    elif top > n:
        raise GraphFormatError(f"vertex id {top - 1} out of range [0, {n})", path)
    check_budget(graph_bytes(n, src.size, weighted=w is not None), path,
                 f"a graph of {n} vertices and {src.size} edges", field="src" if ids is None else None)
    g = Graph._from_coo(src, dst, w, n, dedupe=dedupe, ids=ids, name=nm)
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def _stem(path) -> str:
    name = Path(path).name
    for suf in (".gz",):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
    return name.rsplit(".", 1)[0] if "." in name else name
