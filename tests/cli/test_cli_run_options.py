"""`partplan run` / `validate`: options that would be ignored beside the ones given are refused
(one line, exit 2, before any work), and what a job wrote is reported on every backend."""
from __future__ import annotations

import json

import numpy as np
import pytest

from partplan import Graph
from partplan.io import write_graph
from tests.errlines import one_line, run_cli


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    g = d / "g.mtx"
    i = np.arange(30)
    write_graph(Graph.from_edges(i, (i + 1) % 30, n=30, symmetrize=True), g)
    from partplan.cli.main import main
    assert main(["-q", "partition", str(g), "-k", "2", "-o", str(d / "g.plan")]) == 0
    return d / "g.plan"


@pytest.mark.parametrize("argv, needle", [
    (["bfs", "--roots", "2", "--steal-plot", "{d}/s.png"], "--steal-plot applies with --steal only"),
    (["bfs", "--roots", "2", "--t1", "5", "--steal-solver", "cbc"], "--steal-solver, --t1 apply with --steal only"),
    (["sssp", "--root", "0", "--steal-topology", "tree:2x1"], "--steal-topology applies with --steal only"),
    (["spmm", "-f", "8", "--feature-file", "{d}/H.npy"], "-f shapes the random features"),
    (["spmm", "--seed", "3", "--feature-file", "{d}/H.npy"], "--seed shapes the random features"),
])
def test_options_that_would_be_ignored_are_refused(plan, tmp_path, capsys, argv, needle):
    np.save(tmp_path / "H.npy", np.ones((30, 3)))
    job, *rest = argv
    rc, _, err = run_cli(["run", job, plan, "--backend", "local", *[a.format(d=tmp_path) for a in rest]], capsys)
    one_line(rc, err, 2, needle)
    assert not (tmp_path / "s.png").exists()


def test_validate_without_replay_refuses_the_replays_options(plan, capsys):
    rc, _, err = run_cli(["validate", plan, "--no-replay", "--features", "8"], capsys)
    one_line(rc, err, 2, "--features shapes the replay's random H")
    rc, _, err = run_cli(["validate", plan, "--no-replay", "-q"], capsys)
    assert rc == 0, err


def test_spmm_reports_its_output_on_the_local_backend(plan, tmp_path, capsys):
    rc, out, err = run_cli(["run", "spmm", plan, "--backend", "local", "--output", tmp_path / "Z.npy", "--json"],
                           capsys)
    assert rc == 0, err
    assert json.loads(out)["output"] == str(tmp_path / "Z.npy") and (tmp_path / "Z.npy").is_file()
    rc, out, err = run_cli(["run", "spmm", plan, "--backend", "local", "--output", tmp_path / "Z.npy"], capsys)
    assert rc == 0 and any(ln.split() == ["output", str(tmp_path / "Z.npy")] for ln in out.splitlines()), out


def test_a_negative_search_seed_is_any_integer_seed(plan, capsys):
    """`run bfs --seed -1` ended in numpy's "expected non-negative integer" traceback, though
    every other seed option takes any integer (its low 63 bits): -1 picks the roots 2^63 - 1 does."""
    roots = []
    for seed in ("-1", str(2 ** 63 - 1)):
        rc, out, err = run_cli(["run", "bfs", plan, "--backend", "local", "--roots", "3", "--seed", seed, "--json"],
                               capsys)
        assert rc == 0, err
        roots.append([s_["root"] for s_ in json.loads(out)["searches"]])
    assert roots[0] == roots[1] and len(roots[0]) == 3


@pytest.mark.parametrize("argv, needle", [
    (["spmm", "--nprocs", "2", "--timeout", "1e10"], "--timeout: expected at most 1,000,000 seconds"),
    (["spmm", "--nprocs", "2", "--repeat", "1000000000"], "--repeat: expected an integer in [1, 1,000,000]"),
    (["spmm", "--nprocs", "2", "--warmup", "2000000"], "--warmup: expected an integer in [0, 1,000,000]"),
    (["wcc", "--nprocs", "2", "--timeout", "0.0005"], "--timeout: expected 0 (the default) or at least 0.001"),
    (["lp", "--backend", "local", "--iterations", "10000000"], "--iterations: expected an integer in [1, 1,000,000]"),
    (["pagerank", "--backend", "local", "--max-iter", "10000000"], "--max-iter: expected an integer in [1, 1,000,000]"),
    (["bfs", "--backend", "local", "--roots", "30", "-o", "{d}/p.npz"], "-o: the parents output (int64[30, n]"),
])
def test_counts_past_what_the_runtime_takes_are_refused_before_any_process_starts(plan, capsys, argv, needle, tmp_path,
                                                                                 monkeypatch):
    """A --timeout past gloo's C int of milliseconds, or a --repeat whose timings do not fit in
    memory, failed only after the processes had started."""
    job, *rest = argv
    rest = [a.replace("{d}", str(tmp_path)) for a in rest]
    if job == "bfs":    # the parents of 30 searches over 30 rows: 14,400 bytes, above a 10,000-byte budget
        monkeypatch.setenv("PARTPLAN_MAX_BYTES", "10000")
    rc, _, err = run_cli(["run", job, plan, *rest], capsys)
    one_line(rc, err, 2, needle)
    assert "starting" not in err and "search 1" not in err and not list(tmp_path.iterdir())


def test_a_graph500_root_outside_the_graph_is_refused_before_the_generation(capsys):
    rc, _, err = run_cli(["run", "graph500", "--backend", "local", "--scale", "12", "--root", "4096"], capsys)
    one_line(rc, err, 2, "--root 4096 is not a vertex id of the generated graph (n = 2^12 = 4,096)")
    assert "generated" not in err.replace("generated graph", "")
