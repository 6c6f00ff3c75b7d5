"""Partitioners: real engines (pymetis, mtkahypar, kahypar) and baselines
behind :func:`run_backend`, and the planner API (:mod:`.api`:
``Partition``, ``partition(graph, k, ...)``, save / load)."""
from .api import OBJECTIVES, Partition, load_partition, save_partition
from .backends import (BACKENDS, PRESETS, hypergraph, kahypar_hypergraph, metis, mtkahypar_graph,
                       mtkahypar_hypergraph, run_backend)
from .baselines import block_partition, degree_round_robin, random_partition, striped_partition

__all__ = ["BACKENDS", "OBJECTIVES", "PRESETS", "Partition", "block_partition", "degree_round_robin",
           "hypergraph", "kahypar_hypergraph", "load_partition", "metis", "mtkahypar_graph",
           "mtkahypar_hypergraph", "random_partition", "run_backend", "save_partition",
           "striped_partition"]
