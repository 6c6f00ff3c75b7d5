"""partplan: partition graphs and plan the communication of distributed
SpMM / GNN / BFS workloads.

The package is split by job (see README / ARCHITECTURE): ``io`` reads and writes
graph files, ``models`` builds partitioning models, ``partition`` runs the
partitioners, ``metrics`` counts communication exactly, ``plan`` writes and
checks plan files, ``runtime`` replays them. This module re-exports the
user-facing API.
"""
from .errors import (BackendUnavailableError, DatasetError, GraphFormatError, PartitionError,
                     PartplanError, PlanError)
from .graph import Graph
from .hypergraph import Hypergraph
from .metrics import CommStats, analyze, analyze_15d, analyze_2d

__version__ = "0.1.0"

__all__ = ["Graph", "Hypergraph", "CommStats", "analyze", "analyze_15d", "analyze_2d",
           "PartplanError", "GraphFormatError", "PartitionError", "PlanError", "DatasetError",
           "BackendUnavailableError", "__version__"]
