"""The distributed partitioner under ``mpirun -np 2`` on loopback: every engine's
partition recounted by the analyzer (the exact 1D volumes, an independent
count), the refinement against the engine's own partition, the directed
(transposed nets) path, and the errors decided before any work."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partplan.errors import BackendUnavailableError, PartitionError
from partplan.graph import Graph
from partplan.io.chunked import write_chunked
from partplan.metrics.stats import analyze
from partplan.partition.context import DistributedRefineContext
from partplan.partition.pipeline import distributed as launch
from partplan.partition.engines.mpilibs import missing
from partplan.io.chunked import chunk_split


def _need(engine: str):
    need = missing(engine)
    if need:
        pytest.skip(f"{engine} needs {', '.join(need)} (make mpi)")


@pytest.fixture(scope="module")
def rmat11(tmp_path_factory):
    from partplan.datasets.generators import rmat
    g = rmat(11, seed=3)
    path = write_chunked(g, tmp_path_factory.mktemp("g") / "r11.chunked", chunks=6)
    return g, path


def _figures(g, part, k):
    s = analyze(g, part, k).summary()
    return s["total_volume"], int(s["max_send"]), int(s["max_recv"]), s["compute_imbalance"]


def _check_sidecar(res, g, part, k):
    total, ms, mr, imb = _figures(g, part, k)
    assert (res["result"]["total_volume"], res["result"]["max_send"], res["result"]["max_recv"]) == (total, ms, mr)
    s = analyze(g, part, k)
    assert res["send"] == s.send.tolist() and res["recv"] == s.recv.tolist()
    assert res["compute_load"] == s.compute_load.tolist()


@pytest.mark.dist
def test_zoltan_then_refinement_exact_and_lower_bottleneck(rmat11, tmp_path):
    _need("zoltan")
    g, path = rmat11
    k = 16
    plain = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "z.npy", refine=False, quiet=True,
                                         engine="zoltan")
    p0 = np.load(tmp_path / "z.npy")
    assert p0.shape == (g.n,) and p0.min() >= 0 and p0.max() < k
    _check_sidecar(plain, g, p0, k)
    ref = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "r.npy", quiet=True,
                                       context=DistributedRefineContext(rounds=30, gather_max_pins=0),
                                       engine="zoltan")
    p1 = np.load(tmp_path / "r.npy")
    _check_sidecar(ref, g, p1, k)
    assert ref["refine"]["rounds"] > 0 and ref["gathered"].startswith("skipped: ")   # the rounds, not process 0
    t0, s0, r0, _ = _figures(g, p0, k)
    t1, s1, r1, _ = _figures(g, p1, k)
    assert max(s1, r1) < max(s0, r0)          # the refinement lowers the bottleneck of Zoltan's own partition
    nnz = g.row_nnz.astype(np.int64)
    heaviest = lambda p: int(np.bincount(p, weights=nnz, minlength=k).max())   # noqa: E731
    limit = int(np.floor(1.03 * -(-int(nnz.sum()) // k)))          # ⌊(1+ε)·⌈W/k⌉⌋
    assert heaviest(p1) <= max(limit, heaviest(p0))   # never above the ε-limit (or the engine's, when it was above)
    assert t1 <= 1.15 * t0                    # and keeps the total volume close
    side = json.loads((tmp_path / "r.npy.json").read_text())
    assert side["engine"] == "zoltan" and side["nprocs"] == 2 and len(side["stages"]) == 2
    assert all(st["refine"]["peak_rss_bytes"] > 0 for st in side["stages"])


@pytest.mark.dist
def test_a_graph_that_fits_is_refined_whole_in_process_0(rmat11, tmp_path):
    """At most ``gather_max_pins`` pins (nonzeros + rows): no rounds; process 0 runs the single-process
    pipeline's refinement on the engine's partition with the distributed weight limit, process 1 the
    single-process default pipeline, the better is kept (the engine's only when no worse on both, or
    a lower maximum for at most 3 % more total), then the connectivity passes and the isolated rows'
    placement — the same partition as
    those functions called here (the default through ``partition(g, k)``) give, its figures
    recounted by analyze()."""
    _need("zoltan")
    from partplan import partition
    from partplan.partition.context import PipelineContext, resolve
    from partplan.partition.pipeline.auto import isolated_rows, refine_partition, spread_isolated
    from partplan.partition.refinement.km1_pass import km1_passes
    g, path = rmat11
    k = 16
    iso = isolated_rows(g)
    assert iso.any()
    launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "e.npy", refine=False, quiet=True,
                                 engine="zoltan")
    p0 = np.load(tmp_path / "e.npy")
    nnz = g.row_nnz.astype(np.int64)
    W = int(nnz.sum())
    cap = max(int(np.floor(1.03 * -(-W // k))), int(np.bincount(p0, weights=nnz, minlength=k).max()))
    ctx = resolve(PipelineContext, {"imbalance": 0.03, "seed": 0}, label="auto")
    mid, _ = refine_partition(g, p0, k, context=ctx, weight_cap=cap)
    default = partition(g, k).part
    t0, s0, r0, i0 = _figures(g, p0, k)
    tm, sm, rm, _ = _figures(g, mid, k)
    td, sd, rd, _ = _figures(g, default, k)
    assert max(sm, rm) < max(s0, r0)
    engine_wins = (max(sm, rm) <= max(sd, rd) and tm <= td) or (max(sm, rm) < max(sd, rd) and tm <= 1.03 * td)
    for pipe in (0, 1):
        res = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "w.npy", quiet=True,
                                           engine="zoltan", context=DistributedRefineContext(gather_pipeline=pipe))
        p1 = np.load(tmp_path / "w.npy")
        _check_sidecar(res, g, p1, k)
        gathered = res["gathered"]
        assert res["refine"]["rounds"] == 0 and isinstance(gathered, dict)
        a = gathered["engine_refined"]
        assert (a["max_before"], a["max_after"], a["total_after"]) == (max(s0, r0), max(sm, rm), tm)
        kept = "engine" if not pipe or engine_wins else "pipeline"
        assert gathered["kept"] == kept
        if pipe:
            assert (gathered["pipeline"]["max"], gathered["pipeline"]["total"]) == (max(sd, rd), td)
        passed = km1_passes(g, mid if kept == "engine" else default, k, eps=0.03)
        assert np.array_equal(p1, spread_isolated(g, passed[~iso], iso, k, 0.03))   # then the isolated rows
        assert int(np.bincount(p1, weights=nnz, minlength=k).max()) <= cap      # the distributed weight limit kept
    t1, s1, r1, _ = _figures(g, p1, k)   # with the pipeline beside it: never behind the single-process default
    assert max(s1, r1) <= max(sd, rd) and t1 <= 1.03 * td
    small = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "s.npy", quiet=True, engine="zoltan",
                                         context=DistributedRefineContext(gather_max_pins=g.nnz + g.n - 1))
    assert small["gathered"].startswith(f"skipped: {g.nnz + g.n:,} pins") and small["refine"]["rounds"] > 0


@pytest.mark.slow
@pytest.mark.dist
def test_ptscotch_exact(rmat11, tmp_path):
    _need("ptscotch")
    g, path = rmat11
    res = launch.distributed_partition(path, 8, nprocs=2, output=tmp_path / "s.npy", engine="ptscotch", quiet=True,
                                       context=DistributedRefineContext(rounds=20))
    _check_sidecar(res, g, np.load(tmp_path / "s.npy"), 8)
    assert res["engine"] == "ptscotch"
    # the same seed, the same partition (a deterministic Scotch context: Debian's build is not
    # compiled deterministic, and without it two runs differed in most rows, found by a fuzzer)
    again = launch.distributed_partition(path, 8, nprocs=2, output=tmp_path / "t.npy", engine="ptscotch", quiet=True,
                                         context=DistributedRefineContext(rounds=20))
    assert np.array_equal(np.load(tmp_path / "s.npy"), np.load(tmp_path / "t.npy"))
    assert again["engine_result"] == res["engine_result"]


@pytest.mark.slow
@pytest.mark.dist
def test_directed_graph_nets_are_columns(tmp_path):
    _need("zoltan")
    rng = np.random.default_rng(5)
    n = 600
    src, dst = rng.integers(0, n, 5000), (rng.zipf(1.6, 5000) - 1) % n   # skewed in-degrees: hub columns
    g = Graph.from_edges(src, dst, n=n)
    path = write_chunked(g, tmp_path / "d.chunked", chunks=4)
    for bound in (0, None):   # the distributed rounds, then (the default here) the whole graph in process 0
        ctx = DistributedRefineContext(rounds=30) if bound is None else \
            DistributedRefineContext(rounds=30, gather_max_pins=bound)
        res = launch.distributed_partition(path, 6, nprocs=2, output=tmp_path / "d.npy", quiet=True, context=ctx)
        assert res["symmetric"] is False and res["engine"] == "zoltan"    # the default whenever it is installed
        _check_sidecar(res, g, np.load(tmp_path / "d.npy"), 6)
        assert "backward" not in res["stats"] and "A^T @ G is not counted" in res["stats"]["stats_note"]
        # the connectivity rounds over the processes' rows (the one-process passes read rows): the
        # analyzer-checked result (_check_sidecar) below the refinement's total
        assert res["km1"]["where"] == "distributed"
        assert res["result"]["total_volume"] < res["refine"]["total_volume"]
        assert isinstance(res["gathered"], dict) == (bound is None) and (res["refine"]["rounds"] > 0) == (bound == 0)


@pytest.mark.slow
@pytest.mark.dist
def test_stream_engine_and_graph_file_input(tmp_path):
    _need("stream")
    from partplan.datasets.generators import rmat
    g = rmat(10, seed=1)
    from partplan.io.npz import write_npz
    f = write_npz(g, tmp_path / "g.npz")
    res = launch.distributed_partition(f, 4, nprocs=2, output=tmp_path / "t.npy", quiet=True,
                                       context=DistributedRefineContext(rounds=20, gather_max_pins=0),
                                       engine="stream")
    _check_sidecar(res, g, np.load(tmp_path / "t.npy"), 4)
    assert res["engine"] == "stream"
    ref, out = res["refine"], res["result"]   # the connectivity passes after the refinement: less volume,
    assert out["total_volume"] < ref["total_volume"]   # no higher bottleneck
    assert max(out["max_send"], out["max_recv"]) <= max(ref["max_send"], ref["max_recv"])
    assert out["total_volume"] == ref["total_volume"] - sum(p["removed"] for p in res["km1"]["passes"])


@pytest.mark.slow
@pytest.mark.dist
def test_the_connectivity_rounds_over_two_processes_are_exact(rmat11, tmp_path):
    """The distributed connectivity rounds (``volume_passes = 'distributed'``): proposals, exact
    single-move changes and the commit cross the two processes' nets; the result has less total
    volume than the refinement's, no higher bottleneck, and figures equal to the analyzer's."""
    _need("stream")
    g, path = rmat11
    res = launch.distributed_partition(path, 8, nprocs=2, output=tmp_path / "v.npy", quiet=True, engine="stream",
                                       context=DistributedRefineContext(rounds=20, gather_max_pins=0,
                                                                        volume_passes="distributed"))
    _check_sidecar(res, g, np.load(tmp_path / "v.npy"), 8)
    ref, out, km1 = res["refine"], res["result"], res["km1"]
    assert km1["where"] == "distributed" and sum(p["rounds"] for p in km1["passes"]) > 1
    assert out["total_volume"] < ref["total_volume"]
    assert max(out["max_send"], out["max_recv"]) <= max(ref["max_send"], ref["max_recv"])


@pytest.mark.slow
@pytest.mark.dist
def test_failure_keeps_the_previous_output(tmp_path):
    _need("ptscotch")
    g = Graph.from_edges(np.arange(99), np.arange(1, 100), n=100)      # directed: PT-Scotch refuses it
    path = write_chunked(g, tmp_path / "d.chunked", chunks=2)
    out = tmp_path / "keep.npy"
    np.save(out, np.arange(5))
    r = subprocess.run([sys.executable, "-m", "partplan", "partition", str(path), "-k", "2", "--nprocs", "2",
                        "--engine", "ptscotch", "-o", str(out), "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "symmetric" in r.stderr and "Traceback" not in r.stderr
    assert np.array_equal(np.load(out), np.arange(5))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name]


def test_the_launcher_drops_an_initialised_mpis_environment(monkeypatch):
    # what OpenMPI's singleton init (mpi4py in the calling process) exports; passed on, the nested
    # mpirun joins that job and exits with status 1 before any rank runs
    for key, value in {"PMIX_RANK": "0", "PMIX_SERVER_URI4": "1;tcp4://127.0.0.1:1", "OMPI_MCA_ess": "singleton",
                       "OMPI_MCA_pmix": "^s1", "OMPI_APP_CTX_NUM_PROCS": "1", "OMPI_MCA_orte_launch": "1",
                       "OMPI_COMM_WORLD_RANK": "0", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                       "OMPI_ALLOW_RUN_AS_ROOT": "1"}.items():
        monkeypatch.setenv(key, value)
    users = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none", "PMIX_MCA_gds": "hash",   # a user's MCA
             "OMPI_MCA_plm_rsh_agent": "ssh", "OMPI_MCA_orte_tmpdir_base": "/tmp",            # settings stay
             "OMPI_MCA_pmix_base_verbose": "1", "OMPI_MCA_essential": "x"}
    for key, value in users.items():
        monkeypatch.setenv(key, value)
    env = launch._env()
    assert not [key for key in env if key.startswith("PMIX_") and not key.startswith("PMIX_MCA_")]
    for key in ("OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_APP_CTX_NUM_PROCS", "OMPI_MCA_orte_launch",
                "OMPI_COMM_WORLD_RANK"):
        assert key not in env
    assert {key: env.get(key) for key in users} == users
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"


@pytest.mark.slow
@pytest.mark.dist
def test_a_caller_that_initialised_mpi_can_still_launch(rmat11, tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (make mpi)")
    _need("zoltan")
    g, path = rmat11
    out = tmp_path / "p.npy"
    # the parent initialises MPI (its C environment gains the singleton's variables) and then runs
    # partplan, which inherits them
    code = ("import subprocess, sys; from mpi4py import MPI; MPI.COMM_SELF.Get_rank(); "
            "sys.exit(subprocess.run([sys.executable, '-m', 'partplan'] + sys.argv[1:]).returncode)")
    r = subprocess.run([sys.executable, "-c", code, "partition", str(path), "-k", "4", "--nprocs", "2",
                        "--engine", "zoltan", "-o", str(out), "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    part = np.load(out)
    assert part.shape == (g.n,) and set(np.unique(part)) <= set(range(4))


def test_cli_errors_before_work(rmat11, tmp_path, capsys):
    _need("zoltan")
    from partplan.cli.main import main
    _, path = rmat11
    base = ["partition", str(path), "-k", "4"]
    cases = [(["--nprocs", "2", "-o", str(tmp_path / "x.part")], ".npy"),
             (["--nprocs", "2", "--layout", "2d:2x2", "-o", str(tmp_path / "x.npy")], "--layout"),
             (["--nprocs", "7", "-o", str(tmp_path / "x.npy")], "chunks"),
             (["--engine", "zoltan", "-o", str(tmp_path / "x.npy")], "--nprocs")]
    for extra, word in cases:
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err
        assert word in err and "Traceback" not in err and err.count("partplan: error") == 1
    assert not (tmp_path / "x.npy").exists()


def test_missing_packages_are_named(monkeypatch):
    monkeypatch.setattr("partplan.partition.engines.mpilibs.missing", lambda engine: ["libtrilinos-zoltan-dev"])
    with pytest.raises(BackendUnavailableError, match="libtrilinos-zoltan-dev.*apt-get install"):
        launch.check_request("zoltan", 2, 4)
    with pytest.raises(BackendUnavailableError, match="does not run distributed"):
        launch.check_request("metis", 2, 4)
    with pytest.raises(PartitionError):
        launch.check_request(None, 0, 4)


def test_chunk_split_balances_and_covers():
    nnz = np.array([10, 10, 1000, 10, 10, 10, 500, 10])
    rows = np.full(8, 5)
    for p in (1, 2, 3, 8):
        s = chunk_split(nnz, rows, p)
        assert s[0] == 0 and s[-1] == 8 and np.all(np.diff(s) >= 1) and s.size == p + 1
    s = chunk_split(nnz, rows, 2)
    assert s[1] == 3      # the heavy chunk closes the first process's run
    s = chunk_split(np.array([0, 1000, 0, 0]), np.ones(4), 3)
    assert s.tolist()[0] == 0 and s[-1] == 4 and np.all(np.diff(s) >= 1)


def _running_mpi_job(path, tmp_path, own_group=False):
    """``partplan partition PATH -k 64 --nprocs 2 --engine zoltan`` started and waited for until
    mpirun and its two ranks run and MPI_Init made its files; OpenMPI puts its session folder and
    the ranks' shared-memory segments in this test's folder (TMPDIR, the vader backing directory),
    not in the machine's /tmp. Returns (the launcher's Popen, the pids of mpirun and the ranks,
    made(): the names of those files now). ``own_group``: the launcher leads its own process group
    (as a command a terminal runs in the foreground), so the test can signal the whole group."""
    import os
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from proctools import live_pids
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    tag = f"PARTPLAN_TEST_TAG={tmp_path.name}"
    env = dict(os.environ, PARTPLAN_TEST_TAG=tmp_path.name, TMPDIR=str(tmpdir),
               OMPI_MCA_btl_vader_backing_directory=str(tmpdir), OMPI_MCA_btl_sm_backing_directory=str(tmpdir))
    proc = subprocess.Popen([sys.executable, "-m", "partplan", "partition", str(path), "-k", "64", "--nprocs", "2",
                             "--engine", "zoltan", "-o", str(tmp_path / "k.npy"), "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own_group)

    def made():      # what MPI_Init made: the session folder and the ranks' shared-memory segments
        return [p.name for p in tmpdir.rglob("*") if p.name.startswith(("pid.", "vader_segment", "sm_segment"))]

    procs, end = [], time.monotonic() + 60   # the guard, mpirun and its two ranks (their command lines name the worker)
    while time.monotonic() < end and (len(procs) < 4 or not any(n.startswith(("vader", "sm_")) for n in made())):
        procs = live_pids(cmdline=("partplan.partition.pipeline.mpi_worker",), environ=tag)
        time.sleep(0.05)
    assert len(procs) == 4 and made(), f"the MPI job did not start: {procs}, {made()}"
    return proc, procs, made


@pytest.mark.slow
@pytest.mark.dist
@pytest.mark.parametrize("delay", [0.0, 1.0])
def test_sigkill_of_the_launcher_takes_mpirun_and_the_ranks_down(rmat11, tmp_path, delay):
    """SIGKILL to the launcher while the MPI job runs (as MPI_Init made its files, and a second
    later): mpirun and the ranks go with it, no output, and mpirun, stopped by its guard with one
    SIGTERM, removes its session folder and the ranks' shared-memory segments (in this test's
    folder; a parent-death signal on mpirun itself came once per launcher thread, and the second
    made it exit at once, leaving both)."""
    _need("zoltan")
    import signal
    import time

    from proctools import gone_within
    proc, procs, made = _running_mpi_job(rmat11[1], tmp_path)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone_within(procs, 15.0) == []
    assert not (tmp_path / "k.npy").exists()
    assert made() == []


@pytest.mark.slow
@pytest.mark.dist
def test_an_interrupted_launcher_lets_mpirun_clean_up(rmat11, tmp_path):
    """SIGINT to the launcher while the MPI job runs: mpirun gets SIGTERM before any SIGKILL
    (stop_mpirun), so it removes its shared-memory segments and its session folder (in this test's
    folder); exit 130, no process left, no output."""
    _need("zoltan")
    import signal

    from proctools import gone_within
    proc, procs, made = _running_mpi_job(rmat11[1], tmp_path)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert gone_within(procs, 10.0) == []
    assert not (tmp_path / "k.npy").exists()
    assert made() == []


@pytest.mark.slow
@pytest.mark.dist
def test_ctrl_c_in_a_terminal_lets_mpirun_clean_up(rmat11, tmp_path):
    """SIGINT to the launcher's whole process group (what Ctrl-C in a terminal sends): only the
    launcher gets it (mpirun runs in its own session) and stops mpirun with SIGTERM, so its session
    folder and the ranks' shared-memory segments are removed; exit 130, no process left."""
    _need("zoltan")
    import os
    import signal

    from proctools import gone_within
    proc, procs, made = _running_mpi_job(rmat11[1], tmp_path, own_group=True)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert gone_within(procs, 10.0) == []
    assert not (tmp_path / "k.npy").exists()
    assert made() == []


def test_default_engine_is_chosen_per_graph_and_a_missing_zoltan_said_once(monkeypatch, rmat11, tmp_path):
    """No --engine: the engine rule on the graph's degree figures (engine_rule.choose_engine, its own
    tests hold the boundaries) over the engines installed here; without Zoltan one warning line
    naming `make mpi`."""
    from partplan.partition.pipeline.engine_rule import choose_engine, graph_stats
    _, path = rmat11
    monkeypatch.setattr("partplan.partition.engines.mpilibs.missing", lambda engine: [])
    stats = graph_stats(path, 4)
    assert launch.default_engine(stats) == choose_engine(stats, {"zoltan", "ptscotch", "stream"})
    assert launch.missing_zoltan_warning() is None
    monkeypatch.setattr("partplan.partition.engines.mpilibs.missing",
                        lambda engine: ["libtrilinos-zoltan-dev"] if engine == "zoltan" else [])
    eng, _ = launch.default_engine(stats)
    assert eng == choose_engine(stats, {"ptscotch", "stream"})[0] != "zoltan"
    why = launch.missing_zoltan_warning()
    assert why.startswith("partplan: warning: Zoltan is not installed") and "make mpi" in why
    assert "libtrilinos-zoltan-dev" in why and why.count("\n") == 0
    assert launch.check_request(None, 2, 4) == launch.DEFAULT_ENGINE   # the stream's needs only, before the read


@pytest.mark.dist
@pytest.mark.slow
def test_default_engine_runs_zoltan_on_a_symmetric_graph(rmat11, tmp_path, capsys):
    _need("zoltan")
    g, path = rmat11
    res = launch.distributed_partition(path, 4, nprocs=2, output=tmp_path / "z.npy", quiet=True,
                                       context=DistributedRefineContext(rounds=20))
    assert res["engine"] == "zoltan" and res["symmetric"] is True     # R-MAT 11: no hub stall at k = 4
    from partplan.partition.pipeline.engine_rule import graph_stats
    assert res["engine_choice"]["engine"] == "zoltan"
    assert res["engine_choice"]["stats"] == graph_stats(path, 4)   # the processes' histograms, combined
    _check_sidecar(res, g, np.load(tmp_path / "z.npy"), 4)
    assert "warning" not in capsys.readouterr().err


@pytest.mark.dist
def test_the_json_of_nprocs_has_the_one_process_stats_names(rmat11, tmp_path, capsys):
    """`partition --nprocs N --json` carries ``stats`` under the names of the one-process JSON,
    each equal to analyze()'s count of the written partition, and the table prints the messages."""
    from tests.errlines import run_cli
    g, path = rmat11
    rc, out, err = run_cli(["partition", path, "-k", 4, "--nprocs", 2, "--json", "-q", "-o", tmp_path / "j.npy",
                            "-f", 16, "--dtype", "float64"], capsys)
    assert rc == 0, err
    stats = json.loads(out)["stats"]
    ref = analyze(g, np.load(tmp_path / "j.npy"), 4, f=16, dtype="float64").summary()   # -f / --dtype taken
    assert stats == {name: ref[name] for name in stats} and stats["f"] == 16 and stats["dtype"] == "float64"
    assert stats == {name: ref[name] for name in ref}     # every figure: messages, edge cut and bytes too
    rc, _, err = run_cli(["partition", path, "-k", 4, "--nprocs", 2, "--weight", "w", "-o", tmp_path / "w.npy"],
                         capsys)
    assert rc == 2 and "--weight w" in err and not (tmp_path / "w.npy").exists(), err
    rc, out, err = run_cli(["partition", path, "-k", 4, "--nprocs", 2, "-q", "-o", tmp_path / "t.npy"], capsys)
    assert rc == 0, err
    assert re.search(rf"^messages +{ref['messages']:,} \(edge cut {ref['edge_cut']:,}\)$", out, re.M), out


# --------------------------------------------------------------------------- one partitioner
@pytest.mark.slow
@pytest.mark.dist
def test_the_stream_is_one_engine_in_one_process_and_on_mpi(rmat11, tmp_path):
    """``--engine stream`` means the same engine with and without --nprocs: its MPI run's start
    (before the refinement) equals the single-process engine's partition, same options."""
    _need("stream")
    from partplan.partition.engines import run_backend
    g, path = rmat11
    for opts in ({}, {"passes": 1, "method": "ldg"}):
        launch.distributed_partition(path, 8, nprocs=2, output=tmp_path / "s.npy", engine="stream", refine=False,
                                     quiet=True, engine_options=opts)
        single, _ = run_backend("stream", g, 8, imbalance=0.03, seed=0, **opts)
        assert np.array_equal(np.load(tmp_path / "s.npy"), single), opts


@pytest.mark.slow
@pytest.mark.dist
def test_partition_with_nprocs_is_the_api_path(rmat11, tmp_path):
    """``partition(graph, k, nprocs=N)``: the same resolve() as one process, the distributed
    partitioner behind it; the result's figures recounted by analyze() and the sidecar agree."""
    _need("stream")
    import partplan
    g, path = rmat11
    p = partplan.partition(g, 8, nprocs=2, backend="stream", time_limit=60, f=16, dtype="float64")
    assert p.part.shape == (g.n,) and p.part.min() >= 0 and p.part.max() < 8
    assert (p.stats.summary()["f"], p.stats.summary()["dtype"]) == (16, "float64")      # the width asked for
    r = p.info["distributed"]["result"]
    assert (p.stats.total_volume, max(p.stats.max_send, p.stats.max_recv)) == \
        (r["total_volume"], max(r["max_send"], r["max_recv"]))
    q = partplan.partition(path, 8, nprocs=2, backend="stream", output=tmp_path / "q.npy")   # a chunked directory
    assert np.array_equal(q.part, np.load(tmp_path / "q.npy")) and q.graph_fingerprint == g.fingerprint
    side = json.loads((tmp_path / "q.npy.json").read_text())
    assert side["stats"]["f"] == 128                 # the default width
    kept = side["gathered"]["kept"]                  # a graph that fits: the better of two candidates
    assert q.stats is None and q.backend == ("stream+refine" if kept == "engine" else
                                             f"default pipeline ({side['gathered']['pipeline']['chosen']} start; "
                                             f"beside stream+refine)")
    if kept == "pipeline":
        assert q.model == "graph"                    # the single-process pipeline's graph model
    from partplan.io import write_graph
    f = write_graph(g, tmp_path / "g.npz")                                                  # a graph file
    r = partplan.partition(f, 8, nprocs=2, backend="stream")
    assert r.part.shape == (g.n,) and r.graph_fingerprint == g.fingerprint and r.model == "graph"
    with pytest.raises(PartitionError, match="nprocs"):
        partplan.partition(tmp_path / "nothing-here", 8, nprocs=2)


@pytest.mark.dist
def test_passes_before_the_rounds_start_from_the_engines_partition(rmat11, tmp_path):
    """``passes_first``: the connectivity passes run on the engine's partition before the
    rounds; the sidecar keeps the engine's own figures (recounted here from an engine-only
    run) and the passes' figures, and the result is exact."""
    _need("stream")
    g, path = rmat11
    k = 8
    plain = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "e.npy", refine=False, quiet=True,
                                         engine="stream")
    t0, s0, r0, _ = _figures(g, np.load(tmp_path / "e.npy"), k)
    res = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "f.npy", quiet=True, engine="stream",
                                       context=DistributedRefineContext(rounds=20, passes_first=2))
    _check_sidecar(res, g, np.load(tmp_path / "f.npy"), k)
    eng = res["engine_result"]
    assert (eng["total_volume"], eng["max_send"], eng["max_recv"]) == (t0, s0, r0)
    assert plain["engine_result"] == eng
    first = res["km1_first"]
    assert len(first["passes"]) <= 2 and first["volume_after"] < t0     # less volume, no higher maximum
    assert first["max_load_after"] <= max(s0, r0)
    assert "km1_first" in res["stages"][0] and "km1_first" not in plain
    assert 0 <= res["refine"]["seconds"] <= res["stages"][0]["refine"]["wall_s"] + 0.5


@pytest.mark.dist
def test_the_processes_may_use_every_core_of_the_launcher():
    """The launcher's mpirun binds no process to a core (OpenMPI binds each of up to two processes
    to one): process 1 runs the single-process pipeline, whose lanes use the cores process 0
    leaves. Each rank's CPU affinity is the launcher's own."""
    import os
    import re
    import shutil
    if shutil.which("mpirun") is None or not hasattr(os, "sched_getaffinity"):
        pytest.skip("needs OpenMPI's mpirun (make mpi) and CPU affinity")
    from partplan.partition.pipeline.distributed import _env, mpirun_command
    mine = len(os.sched_getaffinity(0))
    # one write per rank, delimited: mpirun forwards the ranks' writes as they come, so two unbuffered
    # prints ("2", then "\n") can interleave into "22"
    code = "import os; os.write(1, b'<%d>\\n' % len(os.sched_getaffinity(0)))"
    out = subprocess.run(mpirun_command(2) + [sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=120, env=_env(), check=True).stdout
    assert [int(x) for x in re.findall(r"<(\d+)>", out)] == [mine, mine]


def test_chunks_and_processes_hold_rows_where_there_are_enough():
    """A row holding most of the nonzeros (a star's hub, last) left the chunks after it empty, and
    a process given only an empty chunk crashed PT-Scotch: every chunk holds a row when n >= chunks,
    and a hand-written empty chunk is never a process's only one."""
    from partplan.io.chunked import chunk_bounds_by_nnz
    indptr = np.concatenate([[0], np.cumsum(np.r_[np.ones(11, np.int64), 12])])
    for chunks in (2, 3, 12):
        b = chunk_bounds_by_nnz(indptr, chunks)
        assert b[0] == 0 and b[-1] == 12 and np.all(np.diff(b) >= 1), (chunks, b)
    b = chunk_bounds_by_nnz(np.array([0, 3, 6]), 5)          # fewer rows than chunks: some stay empty
    assert b[0] == 0 and b[-1] == 2 and np.all(np.diff(b) >= 0)


@pytest.mark.dist
@pytest.mark.parametrize("empty", ["first", "last"])
def test_an_empty_chunk_is_never_a_process_alone(tmp_path, empty):
    from partplan.io.chunked import ChunkedWriter, chunk_info, process_rows
    g = Graph.from_edges(np.arange(7), np.arange(1, 8), n=8, symmetrize=True)
    path = tmp_path / "z.chunked"
    with ChunkedWriter(path, g.n, weighted=False, directed=False, name="z") as w:
        pieces = [(0, 0), (0, 8)] if empty == "first" else [(0, 8), (8, 8)]
        for lo, hi in pieces:
            a, z = int(g.indptr[lo]), int(g.indptr[hi])
            w.add(g.indptr[lo:hi + 1] - a, g.indices[a:z], None)
        w.commit()
    b = process_rows(chunk_info(path), 2)
    assert b[0] == 0 and b[-1] == 8 and np.all(np.diff(b) >= 1)
    for engine in ("ptscotch", "zoltan"):
        if missing(engine):
            continue
        res = launch.distributed_partition(path, 2, nprocs=2, output=tmp_path / f"{engine}.npy", engine=engine,
                                           quiet=True)
        _check_sidecar(res, g, np.load(tmp_path / f"{engine}.npy"), 2)


@pytest.mark.dist
def test_ptscotch_leaves_a_process_without_rows_out(tmp_path):
    """PT-Scotch crashes (SIGSEGV) on a process with no vertex: such a process is left out of its
    call, the others partition the rows (a path of 9 rows, all on process 0)."""
    _need("ptscotch")
    from partplan.partition.pipeline.distributed import _env, mpirun_command
    code = (
        "import numpy as np\n"
        "from mpi4py import MPI\n"
        "from partplan.graph import Graph\n"
        "from partplan.partition.engines.ptscotch import _mpi_run\n"
        "from partplan.partition.refinement.distributed import RowSlice\n"
        "c = MPI.COMM_WORLD\n"
        "g = Graph.from_edges(np.arange(8), np.arange(1, 9), n=9, symmetrize=True)\n"
        "if c.Get_rank() == 0:\n"
        "    s = RowSlice(0, 9, 9, g.indptr, g.indices, g.indptr, g.indices)\n"
        "else:\n"
        "    s = RowSlice(9, 9, 9, np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64), "
        "np.zeros(0, np.int64))\n"
        "p = _mpi_run(c, s, 9, 3, imbalance=0.03, seed=1, symmetric=True, graph_path='')\n"
        "print('<%d:%s>' % (c.Get_rank(), ','.join(map(str, p.tolist()))), flush=True)\n")
    out = subprocess.run(mpirun_command(2) + [sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=_env())
    assert out.returncode == 0, out.stderr[-2000:]
    import re
    got = dict(re.findall(r"<(\d):([0-9,]*)>", out.stdout))
    assert got["1"] == ""
    part = np.array([int(x) for x in got["0"].split(",")])
    assert part.size == 9 and part.min() >= 0 and part.max() < 3
    assert np.bincount(part, minlength=3).max() <= 4        # 9 rows in 3 parts within PT-Scotch's balance


@pytest.mark.dist
def test_an_edgeless_graph_is_partitioned_by_every_engine(tmp_path):
    """No nonzero anywhere: Zoltan refused the all-zero row weights (-2); the default engine and
    each MPI engine return a partition of volume 0."""
    g = Graph.from_edges(np.zeros(0, np.int64), np.zeros(0, np.int64), n=6)
    path = write_chunked(g, tmp_path / "e.chunked", chunks=2)
    ran = []      # the engine the default chose is not run a second time
    for engine in ("auto", "zoltan", "ptscotch", "stream"):
        if engine != "auto" and (missing(engine) or engine in ran):
            continue
        res = launch.distributed_partition(path, 2, nprocs=2, output=tmp_path / "e.npy", engine=engine, quiet=True)
        ran.append(res["engine"])
        part = np.load(tmp_path / "e.npy")
        assert part.shape == (6,) and part.min() >= 0 and part.max() < 2
        assert res["result"]["total_volume"] == 0
    assert set(ran) >= {e for e in ("zoltan", "ptscotch", "stream") if not missing(e)}


@pytest.mark.dist
def test_the_rounds_take_an_engine_partition_above_the_limit_under_it(tmp_path):
    """The stream balances row nonzeros + 1 per row, the limit counts row nonzeros: on a graph of
    mostly isolated rows its partition is far above the limit, with no volume. The rounds keep
    max(send, recv) and so moved nothing (max 0); the repairs after them may raise it, and take
    every part within ⌊(1 + ε)·⌈nnz / k⌉⌋ (here 2: a partition within it exists)."""
    src, dst = np.array([0, 1, 2, 10]), np.array([1, 2, 3, 11])
    g = Graph.from_edges(src, dst, n=20, symmetrize=True)
    path = write_chunked(g, tmp_path / "iso.chunked", chunks=2)
    limit = int((1 + 0.03) * -(-g.nnz // 4))
    ctx = DistributedRefineContext(gather_max_pins=0)
    res = launch.distributed_partition(path, 4, nprocs=2, output=tmp_path / "i.npy", engine="stream", quiet=True,
                                       context=ctx)
    part = np.load(tmp_path / "i.npy")
    _check_sidecar(res, g, part, 4)
    assert res["engine_result"]["max_weight"] > limit          # the case: the engine's partition above it
    assert int(np.bincount(part, weights=g.row_nnz, minlength=4).max()) <= limit
    raw = launch.distributed_partition(path, 4, nprocs=2, output=tmp_path / "r.npy", engine="stream", quiet=True,
                                       context=ctx, refine=False)      # the engine's partition as it is
    part = np.load(tmp_path / "r.npy")
    _check_sidecar(raw, g, part, 4)
    assert int(np.bincount(part, weights=g.row_nnz, minlength=4).max()) == res["engine_result"]["max_weight"]


@pytest.mark.dist
def test_a_killed_runs_temporaries_are_swept_by_the_next(tmp_path):
    """The work folder and the reserved .npy of a run killed with SIGKILL (no handler runs) stay
    beside the output; the next run to that output removes them (their writer is gone)."""
    g = Graph.from_edges(np.arange(29), np.arange(1, 30), n=30, symmetrize=True)
    out = tmp_path / "w.npy"
    dead = 2 ** 22 + 12345          # above Linux's default pid_max: no such process
    work = tmp_path / f".w.npy.tmp-{dead}-abcd1234"
    work.mkdir()
    (work / "graph.chunked").mkdir()
    npy = tmp_path / f".w.npy.tmp-{dead}-efgh5678.npy"
    npy.write_bytes(b"\x93NUMPY")
    res = launch.distributed_partition(g, 2, nprocs=2, output=out, engine="stream", quiet=True)
    _check_sidecar(res, g, np.load(out), 2)
    assert not work.exists() and not npy.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.npy", "w.npy.json"]


def test_the_balance_floor_of_a_chunked_graph_is_the_loaded_graphs():
    """The floor streamed from a chunked graph's indptr arrays equals balance_floor of the whole
    loaded graph (a star's hub and empty rows; no floor on a path)."""
    from partplan.io.chunked import read_chunked
    from partplan.partition.api import graph_balance_floor
    from partplan.partition.objectives import balance_floor
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        star = Graph.from_edges(np.zeros(24, np.int64), np.arange(1, 25), n=30, symmetrize=True)   # 5 isolated
        path = write_chunked(star, Path(tmp) / "s.chunked", chunks=3)
        got = graph_balance_floor(path, 4, 0.03)
        whole = read_chunked(path)
        assert got == dict(balance_floor(whole.row_nnz, 4, 0.03), weights="row nnz")
        assert got["row"] == 0 and got["row_weight"] == 24 and got["limit"] == 14   # ⌊1.03 · ⌈(48 + 5) / 4⌉⌋
        path2 = write_chunked(Graph.from_edges(np.arange(9), np.arange(1, 10), n=10, symmetrize=True),
                              Path(tmp) / "p.chunked", chunks=2)
        assert graph_balance_floor(path2, 2, 0.03) is None


@pytest.mark.dist
def test_nprocs_warns_of_the_balance_floor_as_one_process_does(tmp_path, capsys):
    """A star's hub outweighs a part's ε-limit: ``--nprocs`` says so in one warning (even under -q)
    and in --json, as the one-process partitioner does."""
    from partplan.cli.main import main
    star = Graph.from_edges(np.zeros(24, np.int64), np.arange(1, 25), n=25, symmetrize=True)
    path = write_chunked(star, tmp_path / "s.chunked", chunks=2)
    assert main(["-q", "partition", str(path), "-k", "4", "--nprocs", "2", "-o", str(tmp_path / "s.npy"),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    warn = [line for line in err.splitlines() if line.startswith("partplan: warning: row 0 weighs 24")]
    assert len(warn) == 1 and "no partition is within ε" in warn[0]
    assert json.loads(out)["balance_floor"]["limit"] == 12      # ⌊1.03 · ⌈48 / 4⌉⌋


def _with_isolated_rows(g, extra: int, seed: int):
    """``g`` with ``extra`` isolated rows (no nonzero in row or column) inserted at random ids."""
    rng = np.random.default_rng(seed)
    n = g.n + extra
    keep = np.sort(rng.choice(n, g.n, replace=False))        # the old rows' new ids
    coo = g.to_scipy().tocoo()
    return Graph.from_edges(keep[coo.row], keep[coo.col], n=n)


@pytest.mark.dist
@pytest.mark.parametrize("engine,gather,directed", [("stream", 0, False), ("zoltan", 0, True),
                                                     ("zoltan", 1 << 24, False)])
def test_isolated_rows_go_where_the_fewest_rows_are(tmp_path, engine, gather, directed):
    """The engines and the refinement weigh rows by their nonzeros, so rows with no nonzero in row
    or column stayed where the engine put them (Zoltan: most in one part). They go, in id order, to
    the part with the fewest rows of H among those below the balance limit, one at a time — the
    brute force over the final partition's other rows — on the rounds' path and the whole graph's,
    over two processes; the volumes, a directed graph's empty rows that are read by others, and
    every part's nonzeros are the analyzer's recount of the same partition."""
    if engine == "zoltan":
        _need("zoltan")
    from partplan.datasets.generators import rmat
    from partplan.partition.objectives import eps_limit
    g = rmat(10, seed=4, symmetrize=not directed)
    h = _with_isolated_rows(g, 900, seed=1)
    nnz, cols = h.row_nnz, np.bincount(h.indices, minlength=h.n)
    iso = (nnz == 0) & (cols == 0)
    assert iso.sum() >= 900 and (not directed or ((nnz == 0) & (cols > 0)).any())
    k = 8
    path = write_chunked(h, tmp_path / "h.chunked", chunks=4)
    res = launch.distributed_partition(path, k, nprocs=2, output=tmp_path / "h.npy", engine=engine, quiet=True,
                                       context=DistributedRefineContext(rounds=20, gather_max_pins=gather))
    part = np.load(tmp_path / "h.npy")
    _check_sidecar(res, h, part, k)
    w = np.maximum(nnz, 1)
    load = np.bincount(part[~iso], weights=w[~iso], minlength=k).astype(np.int64)
    rows = np.bincount(part[~iso], minlength=k).astype(np.int64)
    limit = eps_limit(int(w.sum()), k, 0.03)
    want = np.zeros(k, np.int64)
    for _ in range(int(iso.sum())):                 # one at a time: fewest rows below the limit
        room = np.flatnonzero(load < limit)
        p = int(room[np.lexsort((room, rows[room]))[0]])
        load[p] += 1
        rows[p] += 1
        want[p] += 1
    assert np.array_equal(np.bincount(part[iso], minlength=k), want)
    assert np.all(np.diff(part[iso]) >= 0)
    assert res["isolated"]["rows"] == int(iso.sum()) and res["isolated"]["max_rows"] == int(rows.max())
    assert np.bincount(part, minlength=k).max() <= 1.1 * h.n / k


@pytest.mark.dist
def test_nprocs_says_a_partition_above_its_limit(tmp_path, capsys):
    """Two 10-cliques in 3 parts: no row alone is above the limit, but the rows do not pack within
    it. One process records and says it (over_epsilon, "packing"); --nprocs returned it silently.
    The compute load is counted here."""
    from partplan.cli.main import main
    from partplan.io import write_graph
    src, dst = np.nonzero(np.kron(np.eye(2), np.ones((10, 10))) - np.eye(20))
    g = Graph.from_edges(src, dst, n=20)
    load = lambda part: int(np.bincount(part, weights=g.row_nnz, minlength=3).max())   # noqa: E731
    limit = int(np.floor(1.03 * -(-g.nnz // 3)))
    from partplan import partition
    p = partition(g, 3, nprocs=2)
    assert load(p.part) > limit and p.info["over_epsilon"]["heaviest"] == load(p.part)
    write_graph(g, tmp_path / "c.mtx")
    capsys.readouterr()
    assert main(["partition", str(tmp_path / "c.mtx"), "-k", "3", "--nprocs", "2", "-o", str(tmp_path / "c.npy"),
                 "-q"]) == 0
    err = capsys.readouterr().err
    assert f"above the ε-limit {limit}" in err and "row nnz" in err


@pytest.mark.dist
def test_a_small_graph_in_memory_runs_on_processes_and_closes_its_pipe(recwarn):
    """A graph of fewer than 8 rows was written as 8 chunks and refused with a message about an
    internal file ('chunks = 8 is more than the graph's 6 rows'); the launcher also left the
    workers' stderr pipe to the collector (a ResourceWarning on every call)."""
    import gc
    import warnings
    from partplan import partition
    g = Graph.from_edges(np.arange(5), np.arange(1, 6), n=6, symmetrize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("always", ResourceWarning)
        p = partition(g, 2, nprocs=2)
        gc.collect()
    assert sorted(np.bincount(p.part, minlength=2).tolist()) == [3, 3]
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]
