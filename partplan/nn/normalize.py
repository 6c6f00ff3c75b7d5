"""GCN adjacency normalizations — defined in :mod:`partplan.models.normalize`
(a model of the graph, below the plan layer that records them); re-exported
here, where training code looks for them."""
from ..models.normalize import *  # noqa: F401,F403
from ..models.normalize import NORMALIZATIONS, NormalizationError, check_normalize, normalize_adjacency, \
    with_self_loops  # noqa: F401
