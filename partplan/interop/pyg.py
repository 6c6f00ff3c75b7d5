"""Bridge from PyTorch Geometric: ``Data`` -> :class:`~partplan.graph.Graph` -> plan.

PyG's convention is kept exactly: with the default ``flow="source_to_target"``
an edge ``edge_index[:, e] = (j, i)`` sends ``x_j`` to target ``i``, so the plan's
``Z = A @ H`` has ``A[i, j] = edge_weight[e]`` and equals a ``MessagePassing``
layer with ``aggr="add"`` whose message is ``edge_weight.view(-1, 1) * x_j``
(duplicate edges summed, as PyG's scatter-add does). See
:meth:`partplan.graph.Graph.from_edge_index`.

torch_geometric itself is not imported here: any object with ``edge_index``
(and optionally ``num_nodes``, ``edge_weight`` / ``edge_attr``) works.

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
from typing import Any

from ..errors import OptionError

__all__ = ["from_pyg", "plan_from_pyg"]

from ..io._pyg import Flow, from_pyg  # noqa: E402,F401  (Data -> Graph lives in the io layer)


def plan_from_pyg(data: Any, k: int, *, normalize: str | None = None, out: str | os.PathLike | None = None,
                  flow: Flow = "source_to_target", weight: str | None = "auto", f: int = 128,
                  dtype: str = "float32", **partition_options):
    """Partition a PyG graph for ``k`` ranks and build its communication plan.

    ``A`` is :func:`from_pyg` (``flow``, ``weight``); the partition is
    :func:`partplan.partition` (``partition_options``: model, backend,
    objective, layout, imbalance, seed, ownership, preset, ...); the plan is
    :func:`partplan.build_plan` with ``normalize`` (None, "gcn" or "mean").
    ``f`` / ``dtype`` are the feature width (columns of H) and element type the
    plan is costed for (bytes = rows × f × itemsize). With ``out`` the plan is
    written there (:func:`partplan.write_plan`, a ``.plan`` folder).

    Returns the :class:`~partplan.plan.Plan`.
    """
    from ..partition.api import partition as run_partition
    from ..plan import build_plan, write_plan
    if normalize not in (None, "gcn", "mean"):
        raise OptionError(f"normalize must be None, 'gcn' or 'mean', not {normalize!r}")
    g = from_pyg(data, flow=flow, weight=weight)
    part = run_partition(g, k, f=f, dtype=dtype, **partition_options)
    plan = build_plan(g, part, normalize=normalize, f=f, dtype=dtype)
    if out is not None:
        write_plan(plan, out)
    return plan
