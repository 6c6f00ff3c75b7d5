"""A failed `partplan run` job is one line naming the first rank's cause (issue #53: "the runtime
launcher's line comes with others").

Oracles: the rank whose shard the test truncated (it fails at load, before any collective; its
peers fail after it on a closed connection), and for :func:`_failures` the error files the test
writes itself."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from partplan.runtime.launch import _failures


def _errs(tmp_path, texts):
    out = []
    for r, t in enumerate(texts):
        fh = open(tmp_path / f"rank-{r}.err", "w+")
        fh.write(t)
        out.append(fh)
    return out


ECHO = ("Traceback (most recent call last):\n  File x\npartplan: error: rank {r}: count check in group world "
        "failed: [pair.cc:553] Connection closed by peer [127.0.0.1]:1. GLHF — a peer died, timed out (timeout "
        "60 s) or disagrees with this rank's plan\n")
CAUSE = "partplan: error: p.plan/rank-00002.arrow: shard of rank 2 truncated: 100 bytes, manifest says 9\n"


def test_the_first_rank_to_fail_is_the_cause_and_the_others_are_named_only(tmp_path):
    texts = [ECHO.format(r=0), ECHO.format(r=1), CAUSE, ECHO.format(r=3)]
    codes = [2, 2, 2, 2]
    # rank 2 seen ending in round 1, the others later: its line, the others by number only
    msg = _failures(codes, _errs(tmp_path, texts), set(), set(), {2: 1, 0: 7, 1: 7, 3: 8})
    assert msg == ("rank 2: p.plan/rank-00002.arrow: shard of rank 2 truncated: 100 bytes, manifest says 9 "
                   "(ranks 0, 1, 3 failed after it)")
    # all seen in one round: the error that is no echo of a peer's failure wins
    msg = _failures(codes, _errs(tmp_path, texts), set(), set(), {0: 3, 1: 3, 2: 3, 3: 3})
    assert msg.startswith("rank 2: p.plan/rank-00002.arrow") and "Connection closed" not in msg
    # a peer's echo seen ending before the cause's own exit, within the window: still the cause
    from partplan.runtime.launch import ECHO_WINDOW_ROUNDS
    msg = _failures(codes, _errs(tmp_path, texts), set(), set(), {0: 2, 1: 3, 2: 2 + ECHO_WINDOW_ROUNDS, 3: 4})
    assert msg.startswith("rank 2: p.plan/rank-00002.arrow") and "(ranks 0, 1, 3 failed after it)" in msg
    # ... but a rank that ended well after the window is not the first, whatever it says
    msg = _failures(codes, _errs(tmp_path, texts), set(), set(), {0: 2, 1: 3, 2: 3 + ECHO_WINDOW_ROUNDS, 3: 4})
    assert msg.startswith("rank 0: count check") and "(ranks 1, 2, 3 failed after it)" in msg
    # no order known at all (every rank ended between two polls): the same
    msg = _failures(codes, _errs(tmp_path, texts), set(), set(), {})
    assert msg.startswith("rank 2: p.plan/rank-00002.arrow") and "Traceback" not in msg
    # a rank killed at the deadline is named after the cause
    msg = _failures([2, 0, 2, -9], _errs(tmp_path, texts), {3}, set(), {2: 1, 0: 2})
    assert msg == ("rank 2: p.plan/rank-00002.arrow: shard of rank 2 truncated: 100 bytes, manifest says 9 "
                   "(rank 0 failed after it; rank 3 still running after the deadline, killed)")
    # every rank on one error: the line once
    same = "partplan: error: the plan's shards are inconsistent\n"
    assert _failures([2, 2], _errs(tmp_path, [same, same]), set(), set(), {}) == "the plan's shards are inconsistent"
    # a worker killed by a signal (a dead peer): the dead rank, the others stopped
    msg = _failures([2, -signal.SIGKILL], _errs(tmp_path, [ECHO.format(r=0), ""]), set(), set(), {0: 2, 1: 1})
    assert msg == "rank 1: killed by signal SIGKILL; the other ranks (0) then stopped"
    # the survivor the launcher stopped with SIGTERM is not a second dead rank
    msg = _failures([-signal.SIGTERM, -signal.SIGSEGV], _errs(tmp_path, ["", ""]), set(), {0}, {0: 2, 1: 1})
    assert msg == "rank 1: killed by signal SIGSEGV; the other ranks (0) then stopped"
    # a rank that only relays a peer's failure a collective told it of ("see rank 0's error") and
    # ended first (rank 0 is slower to exit): rank 0's own error is the cause
    relay = "partplan: error: Z.npy: rank 0 could not create the output (see rank 0's error); nothing written\n"
    full = "partplan: error: Z.npy: not enough space on the device for 800 bytes\n"
    msg = _failures([2, 2], _errs(tmp_path, [full, relay]), set(), set(), {1: 3, 0: 9})
    assert msg == "rank 0: Z.npy: not enough space on the device for 800 bytes (rank 1 failed after it)"
    assert _failures([0, 0], _errs(tmp_path, ["", ""]), {0, 1}, set(), {}) == \
        "ranks 0, 1 still running after the deadline; killed"


@pytest.mark.dist
def test_a_run_whose_shard_was_truncated_after_planning_is_one_line(tmp_path):
    import partplan
    from partplan import Graph
    rng = np.random.default_rng(0)
    n = 200
    g = Graph.from_edges(rng.integers(0, n, 1000), rng.integers(0, n, 1000), n=n, symmetrize=True, name="g")
    plan = tmp_path / "g.plan"
    partplan.write_plan(partplan.build_plan(g, np.arange(n) % 3), plan)
    shard = plan / "rank-00001.arrow"
    os.truncate(shard, 100)
    r = subprocess.run([sys.executable, "-m", "partplan", "run", "spmm", str(plan), "--nprocs", "3", "-f", "2",
                        "--timeout", "20", "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("partplan: error:")]
    assert len(errors) == 1 and len(lines) == 1, r.stderr
    assert errors[0].startswith(f"partplan: error: the job failed — rank 1: {shard}: shard of rank 1 truncated")
    assert "Connection" not in r.stderr and "Traceback" not in r.stderr and " | " not in r.stderr


def test_a_cause_that_names_its_rank_is_not_prefixed_twice(tmp_path):
    """A rank's error that already starts with "rank R: " (a comm failure) was printed as
    "rank 0: rank 0: all-gather failed ..."."""
    texts = ["partplan: error: rank 0: all-gather failed: timed out\n", ECHO.format(r=1)]
    msg = _failures([2, 2], _errs(tmp_path, texts), set(), set(), {0: 1, 1: 5})
    assert msg == "rank 0: all-gather failed: timed out (rank 1 failed after it)"
