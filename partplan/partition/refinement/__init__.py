"""What runs after an engine: bottleneck refinement (:mod:`.refine`, FM kernels in
:mod:`.fm`, cluster moves in :mod:`.multilevel`), km1 V-cycles (:mod:`.vcycle`), the
greedy volume pass (:mod:`.km1_pass`), balance repair (:mod:`.rebalance`), hubs apart
(:mod:`.hubs`), decoupled ownership (:mod:`.ownership`), and the refinement of a partition
held by many MPI processes (:mod:`.distributed`, its volume rounds :mod:`.distributed_volume`)."""
