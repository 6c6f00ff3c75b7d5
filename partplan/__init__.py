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
from . import datasets, io, layouts, metrics, models, partition, plan
from .errors import (BackendUnavailableError, DatasetError, GraphFormatError, PartitionError,
                     PartplanError, PlanError)
from .graph import Graph
from .hypergraph import Hypergraph
from .io import read_graph, read_hypergraph, read_partition, write_graph, write_hypergraph, write_partition
from .metrics import CommStats, LayoutStats, analyze, analyze_15d, analyze_2d
from .models import expected_volume
from .partition import Partition, load_partition, save_partition
from .partition.ownership import assign_owners, owner_lower_bound, owner_stats
from .partition.refine import refine
from .plan import Plan, RankPlan, build_plan, load_plan, write_plan
from .runtime.validate import validate_plan
from .interop.pyg import from_pyg, plan_from_pyg

from ._version import __version__  # noqa: E402

__all__ = ["Graph", "Hypergraph", "CommStats", "LayoutStats", "Partition", "Plan", "RankPlan",
           "analyze", "analyze_15d", "analyze_2d", "partition", "load_partition", "save_partition",
           "refine", "assign_owners", "owner_stats", "owner_lower_bound",
           "expected_volume", "from_pyg", "plan_from_pyg", "build_plan", "write_plan", "load_plan", "validate_plan",
           "read_graph", "write_graph", "read_hypergraph", "write_hypergraph", "read_partition",
           "write_partition", "datasets", "io", "metrics", "models", "plan",
           "PartplanError", "GraphFormatError", "PartitionError", "PlanError", "DatasetError",
           "BackendUnavailableError", "__version__"]
