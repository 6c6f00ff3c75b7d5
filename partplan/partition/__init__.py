"""Partitioners: real engines (pymetis, mtkahypar, kahypar) and baselines
behind :func:`run_backend`, and the planner API (:mod:`.api`:
``Partition``, ``partition(graph, k, ...)``, save / load)."""
from .api import OBJECTIVES, Partition, load_partition, save_partition
from .engines import (BACKENDS, PRESETS, hypergraph, kahypar_hypergraph, metis, mtkahypar_graph,
                       mtkahypar_hypergraph, run_backend)
from .engines.baselines import block_partition, degree_round_robin, random_partition, striped_partition

__all__ = ["BACKENDS", "OBJECTIVES", "PRESETS", "Partition", "block_partition", "degree_round_robin",
           "hypergraph", "kahypar_hypergraph", "load_partition", "metis", "mtkahypar_graph",
           "mtkahypar_hypergraph", "random_partition", "run_backend", "save_partition",
           "striped_partition"]


# ``partplan.partition`` is both this package and the planner's front door:
# ``partplan.partition(graph, k, ...)`` calls :func:`.api.partition` while
# ``partplan.partition.metis`` etc. stay importable. A module subclass with
# ``__call__`` gives both without renaming the package fixed by ARCHITECTURE.
import sys as _sys
import types as _types

from .api import partition as _partition


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return _partition(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
__call__ = _partition  # for introspection: ``partplan.partition.__call__`` documents the API
