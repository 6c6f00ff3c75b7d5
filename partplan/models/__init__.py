"""Partitioning models: graph (METIS), column-net and joint hypergraphs,
stochastic (mini-batch) hypergraph. Process layouts live in :mod:`partplan.layouts`."""
from .graph_model import metis_graph
from .hypergraph import column_net, joint_net
from .nets import merge_identical_nets
from .stochastic import (NeighborSampler, SaintNodeSampler, SaintRandomWalkSampler, StochasticModel,
                         expected_volume, hoeffding_nets, make_sampler, stochastic_hypergraph)

__all__ = ["column_net", "joint_net", "metis_graph", "merge_identical_nets",
           "NeighborSampler", "SaintNodeSampler",
           "SaintRandomWalkSampler", "StochasticModel", "expected_volume", "hoeffding_nets",
           "make_sampler", "stochastic_hypergraph"]
