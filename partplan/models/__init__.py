"""Partitioning models: graph (METIS), column-net hypergraph, and more."""
from .graph_model import metis_graph
from .hypergraph import column_net

__all__ = ["column_net", "metis_graph"]
