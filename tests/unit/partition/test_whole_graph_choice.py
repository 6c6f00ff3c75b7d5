"""Which candidate the distributed partitioner keeps on a graph that fits
(:func:`partplan.partition.pipeline.mpi_worker.engine_kept`): the engine's refined partition
only when it is no worse on both figures, or lowers the maximum for at most the pipeline's
volume allowance of extra total volume."""
from __future__ import annotations

import pytest

from partplan.partition.pipeline.mpi_worker import engine_kept


@pytest.mark.parametrize("engine, pipeline, kept", [
    ((100, 1000), (100, 1000), True),     # a tie: the engine's (the pipeline's gains nothing)
    ((99, 1000), (100, 1000), True),
    ((100, 999), (100, 1000), True),
    ((101, 900), (100, 1000), False),     # a higher maximum is never traded for total volume
    ((99, 1030), (100, 1000), True),      # a lower maximum for 3 % more total
    ((99, 1031), (100, 1000), False),     # ... and not for more
    ((100, 1001), (100, 1000), False),    # the same maximum for more total
])
def test_the_rule(engine, pipeline, kept):
    refined = {"max_after": engine[0], "total_after": engine[1]}
    assert engine_kept(refined, {"max": pipeline[0], "total": pipeline[1]}, 0.03) is kept
