"""How ``partition()`` runs: the stages model → engine → post-passes → measure
(:mod:`.stages`), the default pipeline (:mod:`.auto`) with its lanes (:mod:`.lanes`), and the same partitioner on many MPI processes
(:mod:`.distributed`, whose processes run :mod:`.mpi_worker`)."""
