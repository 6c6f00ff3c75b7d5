"""The global ``-q`` (``partplan -q CMD ...``) silences every command's progress,
as ``partplan CMD ... -q`` does (issue #50: ``partplan -q partition`` printed
its progress because the command's own ``-q`` default reset the global one)."""
import argparse
import subprocess
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from partplan.cli.main import build_parser, iter_parsers, main


@pytest.fixture
def mtx(tmp_path):
    rng = np.random.default_rng(0)
    n = 120
    src = rng.integers(0, n, 500)
    dst = (src + rng.integers(1, 9, 500)) % n
    A = sp.coo_matrix((np.ones(500), (src, dst)), shape=(n, n)).tocsr()
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(str(path), ((A + A.T) > 0).astype(float))
    return path


def _partition(mtx, out, where: str, capfd) -> str:
    args = ["partition", str(mtx), "-k", "4", "-o", str(out)]   # a plan: reading, partitioning, plan progress
    if where == "global":
        args = ["-q"] + args
    elif where == "command":
        args = args + ["-q"]
    capfd.readouterr()
    assert main(args) == 0
    return capfd.readouterr().err


def test_global_q_silences_partition_progress(mtx, tmp_path, capfd):
    loud = _partition(mtx, tmp_path / "a.plan", "none", capfd)
    assert loud.strip(), "partition without -q prints progress (else this test proves nothing)"
    assert _partition(mtx, tmp_path / "b.plan", "command", capfd) == ""
    assert _partition(mtx, tmp_path / "c.plan", "global", capfd) == ""


def test_every_command_sees_a_global_q():
    """Each (sub)command's -q, its own or the one main adds, leaves a -q given
    before the command standing; without any -q the command sees False."""
    parser = build_parser()
    checked = 0
    for path, p in iter_parsers(parser):
        if not path:
            continue
        own = [a for a in p._actions if "--quiet" in a.option_strings]
        assert own, path
        assert all(a.default is argparse.SUPPRESS for a in own), path   # a subcommand never resets it
        checked += 1
    assert checked > 10
    assert parser.parse_args(["-q", "partition", "g.mtx", "-k", "2"]).quiet is True
    assert parser.parse_args(["partition", "g.mtx", "-k", "2"]).quiet is False
    assert parser.parse_args(["-q", "datasets", "fetch", "x"]).quiet is True
    assert parser.parse_args(["datasets", "fetch", "x"]).quiet is False


@pytest.mark.dist
@pytest.mark.slow
def test_console_script_global_q_is_quiet(mtx, tmp_path):
    """The installed entry point, in a process of its own."""
    run = subprocess.run([sys.executable, "-m", "partplan", "-q", "partition", str(mtx), "-k", "4", "-o",
                          str(tmp_path / "g.plan")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
