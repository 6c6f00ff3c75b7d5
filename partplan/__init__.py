"""partplan: partition graphs and plan the communication of distributed
SpMM / GNN / BFS workloads.

The package is split by job (see README / ARCHITECTURE): ``io`` reads and writes
graph files, ``datasets`` holds generators and real graphs, ``models`` builds
partitioning models, ``partition`` runs the partitioners (and is itself
callable: ``partplan.partition(graph, k, ...)``), ``metrics`` counts
communication exactly, ``plan`` writes, loads and checks plan files. This
module re-exports the user-facing API.

Examples
--------
>>> import partplan
>>> g = partplan.datasets.load("email-Enron")            # embedded, no download
>>> p = partplan.partition(g, 16, model="graph")          # METIS            # doctest: +SKIP
>>> partplan.analyze(g, p.part).total_volume              # rows of H        # doctest: +SKIP
"""
import importlib as _importlib

from ._version import __version__

#: public name -> (module, attribute); ``None`` for a subpackage itself. Loaded on first access
#: (PEP 562): ``import partplan.runtime`` in a launched worker then loads the runtime, not the
#: partitioner, the generators and scipy.spatial the rest of the facade needs.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    **{m: (f"partplan.{m}", None) for m in ("datasets", "interop", "io", "layouts", "metrics", "models", "nn", "partition",
                                                 "plan")},
    **{e: ("partplan.errors", e) for e in ("BackendUnavailableError", "DatasetError", "GraphFormatError",
                                           "PartitionError", "PartplanError", "PlanError")},
    "Graph": ("partplan.graph", "Graph"),
    "Hypergraph": ("partplan.hypergraph", "Hypergraph"),
    **{f: ("partplan.io", f) for f in ("read_graph", "read_hypergraph", "read_partition", "write_graph",
                                       "write_hypergraph", "write_partition")},
    **{m: ("partplan.metrics", m) for m in ("CommStats", "LayoutStats", "analyze", "analyze_15d", "analyze_2d")},
    "expected_volume": ("partplan.models", "expected_volume"),
    **{m: ("partplan.partition", m) for m in ("Partition", "load_partition", "save_partition")},
    **{m: ("partplan.partition.refinement.ownership", m)
       for m in ("assign_owners", "owner_lower_bound", "owner_stats")},
    "refine": ("partplan.partition.refinement.refine", "refine"),
    **{m: ("partplan.plan", m) for m in ("Plan", "RankPlan", "build_plan", "load_plan", "write_plan")},
    "validate_plan": ("partplan.runtime.validate", "validate_plan"),
    **{m: ("partplan.interop.pyg", m) for m in ("from_pyg", "plan_from_pyg")},
}


def __getattr__(name: str):
    """Load a public name on first use (and keep it: later lookups are plain attributes)."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'partplan' has no attribute {name!r}") from None
    value = _importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "BackendUnavailableError",
    "CommStats",
    "DatasetError",
    "Graph",
    "GraphFormatError",
    "Hypergraph",
    "LayoutStats",
    "Partition",
    "PartitionError",
    "PartplanError",
    "Plan",
    "PlanError",
    "RankPlan",
    "__version__",
    "analyze",
    "analyze_2d",
    "analyze_15d",
    "assign_owners",
    "build_plan",
    "datasets",
    "expected_volume",
    "from_pyg",
    "io",
    "load_partition",
    "load_plan",
    "metrics",
    "models",
    "owner_lower_bound",
    "owner_stats",
    "partition",
    "plan",
    "plan_from_pyg",
    "read_graph",
    "read_hypergraph",
    "read_partition",
    "refine",
    "save_partition",
    "validate_plan",
    "write_graph",
    "write_hypergraph",
    "write_partition",
    "write_plan",
]
