"""The partitioner past one machine: MPI engines and a distributed bottleneck refinement.

Runs as its own stage under ``mpirun`` (:func:`.launch.distributed_partition`;
``partplan partition DIR -k K --nprocs N``): a streamed start (Fennel in
process 0), PT-Scotch (:mod:`.ptscotch`) or Zoltan PHG (:mod:`.zoltan`)
through ctypes, then :mod:`.refine` lowers
max(send, recv) with exact volume deltas and, for a symmetric pattern,
:mod:`partplan.partition.km1_pass` lowers the total volume in process 0
without raising that maximum. Nothing here is imported by the
single-process pipeline; ``mpi4py`` is imported only inside the MPI processes.
"""
from .launch import DEFAULT_ENGINE, ENGINES, distributed_partition

__all__ = ["distributed_partition", "ENGINES", "DEFAULT_ENGINE"]
