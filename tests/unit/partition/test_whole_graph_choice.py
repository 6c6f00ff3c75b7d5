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


@pytest.mark.parametrize("engine_heaviest, pipeline_heaviest, kept", [
    (5, 4, False),      # only the pipeline's within the limit (4): it wins whatever the figures
    (4, 5, True),       # only the engine's within it
    (4, 4, True),       # both within it: the figures decide (the engine's is lower on both)
    (6, 5, True),       # both above it: the figures decide
])
def test_a_candidate_within_the_weight_limit_wins_against_one_above_it(engine_heaviest, pipeline_heaviest, kept):
    refined = {"max_after": 1, "total_after": 2, "heaviest": engine_heaviest}
    pipeline = {"max": 2, "total": 4, "heaviest": pipeline_heaviest}
    assert engine_kept(refined, pipeline, 0.03, 4) is kept
    assert engine_kept(refined, pipeline, 0.03) is True      # no limit given: the figures alone
