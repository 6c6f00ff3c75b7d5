"""Interoperation with other systems: PyG's ``Data`` in (:func:`from_pyg`,
:func:`plan_from_pyg`) and a plan's partition out to METIS, DGL and PyG
(:func:`export_plan`). Partitions written by those systems are read by
:mod:`partplan.io.foreign`.
"""
from .export import export_dgl, export_metis, export_plan, export_pyg
from .pyg import from_pyg, plan_from_pyg

__all__ = ["export_dgl", "export_metis", "export_plan", "export_pyg", "from_pyg", "plan_from_pyg"]
