"""Column-net hypergraph model of 1D row-wise SpMM.

Vertex i = row i of A (weight = nnz of the row: compute load). Net j = column
j of A; its pins are the rows with a nonzero in column j plus the owner j
itself (the diagonal), so Σ_j (λ_j − 1) over a row partition equals the exact
1D volume counted by :func:`partplan.metrics.analyze` (Çatalyürek & Aykanat
1999). Nets with a single pin can never be cut and are dropped (mtkahypar
rejects empty nets). Built from ``A^T`` (CSC of A) by scipy; no Python loops.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..graph import Graph, check_graph
from ..hypergraph import Hypergraph
from .graph_model import model_vertex_weights


def column_net(graph: Graph, *, net_weight: int = 1, vertex_weights: str = "nnz",
               drop_single_pin: bool = True) -> Hypergraph:
    """Column-net hypergraph of ``graph`` (see module doc).

    net_weight : weight of every net (e.g. bytes per row f·dtype; 1 = rows).
    vertex_weights : "nnz" (row nonzeros, at least 1) or "unit".
    """
    from .._args import check_int
    check_graph(graph)
    net_weight = check_int("net_weight", net_weight, lo=1)
    vw = model_vertex_weights(graph, vertex_weights)
    n = graph.n
    pat = sp.csr_matrix((np.ones(graph.nnz, dtype=np.int8), graph.indices, graph.indptr), shape=(n, n))
    pat = (pat + sp.identity(n, dtype=np.int8, format="csr")).tocsc()  # owner is always a pin
    pat.sum_duplicates()
    net_ptr = pat.indptr.astype(np.int64)
    pins = pat.indices.astype(np.int64)
    sizes = np.diff(net_ptr)
    if drop_single_pin:
        keep = sizes >= 2
        mask = np.repeat(keep, sizes)
        pins = pins[mask]
        net_ptr = np.concatenate([[0], np.cumsum(sizes[keep])]).astype(np.int64)
    m = net_ptr.size - 1
    return Hypergraph(n, net_ptr, pins, np.full(m, int(net_weight), dtype=np.int64), vw,
                      name=graph.name + ":column-net")


def joint_net(graph: Graph, *, net_weight: int = 1, vertex_weights: str = "nnz",
              merge: bool = True) -> Hypergraph:
    """Joint forward + backward model for a directed ``A``: the column nets of
    ``A`` (forward ``Z = A H``) together with the column nets of ``A^T``
    (backward ``A^T G``, i.e. one net per *row* of A with the diagonal as a pin).

    Its km1 = forward volume + backward volume of 1D row-wise SpMM (both passes
    share the row partition). With ``merge`` identical forward/backward nets
    are merged into one net of double weight (every net for symmetric A), which
    leaves km1 unchanged. vertex_weights "nnz" = row nnz + column nnz (the
    compute of both passes; the graph's own vertex weights, at least 1, when it
    has them: they are what the planner balances), or "unit".
    """
    from .nets import merge_identical_nets

    vw = model_vertex_weights(check_graph(graph), vertex_weights)      # checked before the work
    if vertex_weights == "nnz" and graph.vertex_weights is None:
        vw = np.maximum(graph.row_nnz + graph.transpose().row_nnz, 1)
    fw = column_net(graph, net_weight=net_weight, vertex_weights="unit")
    bw = column_net(graph.transpose(), net_weight=net_weight, vertex_weights="unit")
    ptr = np.concatenate([fw.net_ptr, bw.net_ptr[1:] + fw.net_ptr[-1]])
    pins = np.concatenate([fw.pins, bw.pins])
    w = np.concatenate([fw.net_weights, bw.net_weights])
    if merge:
        ptr, pins, w = merge_identical_nets(ptr, pins, w)
    return Hypergraph(graph.n, ptr, pins, w, vw, name=graph.name + ":joint-net")
