"""Partitioners: real engines (pymetis, mtkahypar, kahypar) and baselines."""
from .baselines import block_partition, degree_round_robin, random_partition, striped_partition
from .backends import hypergraph, metis, mtkahypar_hypergraph

__all__ = ["block_partition", "degree_round_robin", "hypergraph", "metis", "mtkahypar_hypergraph",
           "random_partition", "striped_partition"]
