"""The executor: every layout's forward and backward program on LocalComm and on
real gloo processes, checked against scipy; measured bytes against the
analyzer; dead peers, count mismatches and torchrun."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from partplan import Graph, PartplanError, PlanError, analyze, analyze_15d, analyze_2d, datasets
from partplan.errors import OutputPathError
from partplan.plan import build_plan, load_plan, write_plan
from partplan.runtime.spmm import random_rows, replay, run_spmm

torch = pytest.importorskip("torch")

LAYOUTS = [("1d", 2), ("1d", 3), ("1.5d:2", 4), ("1.5d:3", 6), ("2d:1x2", 2), ("2d:2x2", 4), ("2d:2x3", 6)]


def graph(directed: bool, n=150, m=900, seed=0, weighted=True):
    rng = np.random.default_rng(seed)
    w = rng.random(m) + 0.25 if weighted else None
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), w, n=n, symmetrize=not directed,
                            name=f"r{seed}{'d' if directed else 's'}")


def blocks(lay_spec, ranks):
    from partplan.layouts import parse_layout
    return parse_layout(lay_spec, ranks).row_blocks


def analyzer_volume(g, part, spec, ranks):
    b = blocks(spec, ranks)
    if spec.startswith("1.5d"):
        return analyze_15d(g, part, ranks // b, b=b).volume
    if spec.startswith("2d"):
        R, C = map(int, spec[3:].split("x"))
        return analyze_2d(g, part, R, C).volume
    return analyze(g, part, ranks).volume


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("spec,ranks", LAYOUTS)
def test_local_forward_backward_equal_scipy(spec, ranks, directed):
    g = graph(directed, seed=ranks)
    part = np.random.default_rng(1).integers(0, blocks(spec, ranks), g.n)
    plan = build_plan(g, part, ranks, layout=spec)
    A = g.to_scipy()
    H = np.random.default_rng(2).standard_normal((g.n, 5))
    for prog, M in (("forward", A), ("backward", A.T.tocsr())):
        Z = replay(plan, H, prog)
        if spec == "1d":   # local CSRs keep scipy's summation order
            assert np.array_equal(Z, M @ H), prog
        else:
            np.testing.assert_allclose(Z, M @ H, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec,ranks", LAYOUTS)
def test_measured_bytes_are_the_analyzers_volume(spec, ranks, tmp_path):
    g = graph(True, seed=10 + ranks)
    part = np.random.default_rng(3).integers(0, blocks(spec, ranks), g.n)
    path = write_plan(build_plan(g, part, ranks, layout=spec), tmp_path / "p.plan")
    rep = run_spmm(path, backend="local", f=7, dtype="float64", repeat=1, compare=("oblivious",))
    vol = analyzer_volume(g, part, spec, ranks)   # independent count (metrics), not the plan's
    assert rep["bytes_match"] and rep["bytes_measured"] == rep["bytes_predicted"] == int(vol.sum()) * 7 * 8
    assert rep["messages_measured"] == int(np.count_nonzero(vol))
    if spec == "1d":
        assert rep["oblivious_bytes"] == analyze(g, part, ranks).summary()["oblivious_volume"] * 7 * 8


def _torch_csr_vs_scipy():
    """The "scipy" kernel is scipy's own product: bitwise ``A @ X``. torch's CSR
    kernel (MKL on CPU) sums each row in an order its instruction set and thread
    count choose (AVX-512 and AVX2 differ by ~1e-13): within 1e-12 of ``|A| @ |X|``
    (a relative bound that holds for any summation order), at 1 and 2 threads."""
    from partplan.runtime.ops import TorchOps
    g = datasets.load("email-Enron")
    A = g.to_scipy()[:4000]
    ip, ix, d = A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data
    X = np.random.default_rng(0).standard_normal((g.n, 8))
    ref, bound = A @ X, 1e-12 * (abs(A) @ np.abs(X))
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for kernel in ("scipy", "torch"):
                ops = TorchOps("float64", "cpu", kernel)
                out = ops.empty(4000, 8)
                ops.spmm(ops.matrix(ip, ix, d, A.shape), torch.from_numpy(X), out)
                Z = out.numpy()
                if kernel == "scipy":
                    assert np.array_equal(Z, ref), (kernel, threads)
                else:
                    err = np.abs(Z - ref)
                    assert (err <= bound).all(), (kernel, threads, float(err.max()))
    finally:
        torch.set_num_threads(before)


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as fh:
            return {w for line in fh if line.startswith("flags") for w in line.split()}
    except OSError:
        return set()


@pytest.mark.parametrize("isa", [None, "AVX2", "SSE4_2"])
def test_torch_csr_kernel_equals_scipy(isa):
    """In this process, and with ``isa`` in a process whose MKL and ATen are held
    to that instruction set: on an AVX-512 machine AVX2 is the other path, on an
    AVX2 machine SSE4.2 (ATen's default, unvectorized kernels) is."""
    if isa is None:
        _torch_csr_vs_scipy()
        return
    if isa == "AVX2" and "avx512f" not in _cpu_flags():
        pytest.skip("this CPU's own path is AVX2: the in-process case ran it")
    aten = {"AVX2": "avx2", "SSE4_2": "default"}[isa]
    env = dict(os.environ, MKL_ENABLE_INSTRUCTIONS=isa, ATEN_CPU_CAPABILITY=aten)
    code = "import test_runtime as t; t._torch_csr_vs_scipy()"
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


# ----------------------------------------------------------------------------- gloo processes
def _features(tmp_path, n, f, dtype):
    H = np.random.default_rng(5).standard_normal((n, f)).astype(dtype)
    np.save(tmp_path / "H.npy", H)
    return tmp_path / "H.npy", H


@pytest.mark.parametrize("spec,ranks,directed,programs", [
    ("1d", 2, True, ("forward", "backward")), ("1.5d:2", 2, False, ("forward",)),
    ("2d:2x1", 2, True, ("backward",)), ("2d:1x2", 2, False, ("forward",))],
    ids=["1d-2-True", "1.5d:2-2-False", "2d:2x1-2-True", "2d:1x2-2-False"])
def test_gloo_p2_every_layout_writes_scipys_Z(spec, ranks, directed, programs, tmp_path):
    """Each layout's exchange over gloo (one launch per program; both programs of every layout
    are LocalComm's in the unit tests)."""
    g = graph(directed, n=300, m=2000, seed=ranks)
    part = np.random.default_rng(4).integers(0, blocks(spec, ranks), g.n)
    path = write_plan(build_plan(g, part, ranks, layout=spec), tmp_path / "p.plan")
    hpath, H = _features(tmp_path, g.n, 6, np.float64)
    A = g.to_scipy()
    for prog, M in (("forward", A), ("backward", A.T.tocsr())):
        if prog not in programs:
            continue
        out = tmp_path / f"Z-{prog}.npy"
        rep = run_spmm(path, nprocs=ranks, backend="gloo", features=hpath, output=out, repeat=2,
                       kernel="scipy", program=prog, timeout=30)
        Z = np.load(out)
        assert rep["bytes_match"] and rep["ranks"] == ranks and rep["dtype"] == "float64"
        if spec == "1d":
            assert np.array_equal(Z, M @ H), prog
        else:
            np.testing.assert_allclose(Z, M @ H, rtol=1e-12, atol=1e-12)
        assert not list(tmp_path.glob(".Z*partial"))


def test_gloo_p4_real_graph_float32_with_baselines(tmp_path):
    g = datasets.load("email-Enron")
    from partplan.partition.api import partition
    p = partition(g, 4, model="graph", backend="metis", seed=0)
    path = write_plan(build_plan(g, p), tmp_path / "e.plan")
    out = tmp_path / "Z.npy"
    rep = run_spmm(path, nprocs=4, backend="gloo", f=8, seed=3, output=out, repeat=2,
                   compare=("oblivious", "bare"), timeout=60)
    H = random_rows(np.arange(g.n), 8, 3, "float64")   # the same rows every rank generated
    ref = g.to_scipy() @ H
    Z = np.load(out)
    assert Z.dtype == np.float32
    assert np.abs(Z - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    st = analyze(g, p.part, 4)
    assert rep["bytes_match"] and rep["bytes_measured"] == st.total_volume * 8 * 4
    assert rep["oblivious_bytes"] == st.summary()["oblivious_volume"] * 8 * 4
    assert rep["bare_a2a_s"] > 0 and rep["exchange_s"] > 0
    assert max(rep["shard_array_bytes_per_rank"]) < g.nnz * 16   # no rank holds the whole graph


# ----------------------------------------------------------------------------- faults
def _plan2(tmp_path, n=400):
    g = graph(False, n=n, m=3000, seed=7)
    part = np.arange(g.n) % 2
    return g, write_plan(build_plan(g, part, 2), tmp_path / "f.plan")


FAULTS = Path(__file__).resolve().parents[2] / "faults"  # a sitecustomize that kills a worker (test-only)


def _kill_at_exchange(monkeypatch, spec: str) -> None:
    """Launched workers load tests/faults/sitecustomize.py: rank:N[:method] dies at its N-th exchange."""
    rest = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAULTS)] + rest))
    monkeypatch.setenv("KILL_AT_EXCHANGE", spec)


def test_dead_peer_fails_every_survivor_within_the_timeout(tmp_path, monkeypatch):
    _, path = _plan2(tmp_path)
    _kill_at_exchange(monkeypatch, "1:4")   # rank 1 SIGKILLs itself at its 4th exchange
    t0 = time.monotonic()
    with pytest.raises(PartplanError) as ei:
        run_spmm(path, nprocs=2, backend="gloo", f=4, repeat=50, timeout=15)
    msg = str(ei.value)
    assert time.monotonic() - t0 < 15 + 60
    assert "rank 1: killed by signal SIGKILL" in msg
    assert "the other ranks (0) then stopped" in msg and "failed" in msg and "Traceback" not in msg


def test_count_mismatch_is_one_clear_error_on_every_rank(tmp_path):
    import hashlib
    from partplan.plan.store import _read_arrow, _write_arrow
    _, path = _plan2(tmp_path)
    f = path / "rank-00001.arrow"
    meta, arrays = _read_arrow(f)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["fwd.2.send_counts"][0] -= 1      # rank 1 would send one row fewer than rank 0 expects
    arrays["fwd.1.idx"] = arrays["fwd.1.idx"][:-1]
    meta["programs"]["forward"]["buffers"]["send"] -= 1
    size, digest = _write_arrow(f, arrays, meta)
    m = json.loads((path / "manifest.json").read_text())
    m["shards"][1].update(bytes=size, sha256=digest)
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PartplanError) as ei:
        run_spmm(path, nprocs=2, backend="gloo", f=4, repeat=1, timeout=15)
    msg = str(ei.value)   # one cause (the first rank's), the other rank named after it, not its text again
    assert "inconsistent" in msg and " | " not in msg
    assert ("rank 0: the plan's shards" in msg and msg.endswith("(rank 1 failed after it)")) or \
        ("rank 1: the plan's shards" in msg and msg.endswith("(rank 0 failed after it)")), msg


def test_wrong_process_count_and_bad_inputs_are_refused_before_starting(tmp_path):
    g, path = _plan2(tmp_path)
    with pytest.raises(PlanError, match="plan is for 2 ranks"):
        run_spmm(path, nprocs=3)
    np.save(tmp_path / "bad.npy", np.zeros((g.n + 1, 3)))
    with pytest.raises(PlanError, match="n = 400 rows"):
        run_spmm(path, nprocs=2, features=tmp_path / "bad.npy")
    with pytest.raises(OutputPathError, match="does not exist"):
        run_spmm(path, nprocs=2, output=tmp_path / "nope" / "Z.npy")
    with pytest.raises(PlanError, match="--compare"):
        run_spmm(path, nprocs=2, compare=("magic",))


# ----------------------------------------------------------------------------- launchers
def test_torchrun_runs_the_same_command(tmp_path):
    from tests.scripts import script_beside_python   # (this module is also imported alone, by path)
    exe = script_beside_python("torchrun")
    g, path = _plan2(tmp_path, n=200)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([str(exe), "--nproc-per-node", "2", "--master-port", str(_port()), "-m", "partplan",
                        "run", "spmm", str(path), "-f", "3", "--repeat", "1", "--json",
                        "--output", str(tmp_path / "Z.npy"), "--timeout", "30"],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout[r.stdout.index("{"):])
    assert rep["bytes_match"] and rep["ranks"] == 2
    ref = g.to_scipy() @ random_rows(np.arange(g.n), 3, 0, "float64")
    assert np.abs(np.load(tmp_path / "Z.npy") - ref).max() < 1e-4


def _port():
    from partplan.runtime.launch import free_port
    return free_port()


def test_cli_plan_and_run_local(tmp_path, capsys):
    from partplan.cli.main import main
    g = graph(False, n=120, m=600, seed=3)
    from partplan.io import write_graph
    write_graph(g, tmp_path / "g.mtx")
    np.save(tmp_path / "p.npy", np.arange(g.n) % 2)
    assert main(["plan", str(tmp_path / "g.mtx"), "--partition", str(tmp_path / "p.npy"), "--layout", "1.5d:2",
                 "-o", str(tmp_path / "g.plan"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ranks"] == 4 and info["row_blocks"] == 2 and info["layout"] == "1.5d:2"
    assert main(["run", "spmm", str(tmp_path / "g.plan"), "--backend", "local", "--json", "-f", "4"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["bytes_match"] and rep["ranks"] == 4
    assert main(["run", "spmm", str(tmp_path / "g.plan"), "--nprocs", "3"]) == 2
    assert "plan is for 4 ranks" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_nccl_one_rank_end_to_end(tmp_path):
    g = graph(True, n=500, m=4000, seed=1)
    path = write_plan(build_plan(g, np.zeros(g.n, dtype=np.int64), 1), tmp_path / "one.plan")
    hpath, H = _features(tmp_path, g.n, 8, np.float32)
    rep = run_spmm(path, nprocs=1, backend="nccl", features=hpath, output=tmp_path / "Z.npy", repeat=2)
    ref = g.to_scipy() @ H.astype(np.float64)
    assert rep["kernel"] == "torch" and rep["device"].startswith("cuda")
    assert np.abs(np.load(tmp_path / "Z.npy") - ref).max() <= 1e-5 * max(1, np.abs(ref).max())


@pytest.mark.parametrize("c, backend", [(3, "local"), (4, "local"),
                                        pytest.param(3, "gloo", marks=[pytest.mark.dist, pytest.mark.slow])])
def test_15d_allreduce_bytes_predicted_equal_measured(tmp_path, c, backend):
    """The rows each replica hands to the 1.5D all-reduce (its block's n_i rows) are predicted from
    the manifest and equal what the comm counts, for c that does not divide n_i (n = 31); the
    planner's ring model moves 2 (c - 1) n_i rows per block in all (no rounding)."""
    g = graph(False, n=31, m=120, seed=1)
    part = np.zeros(31, dtype=np.int64)                  # one block of 31 rows
    plan = build_plan(g, part, c, layout=f"1.5d:{c}", f=16)
    path = write_plan(plan, tmp_path / "p.plan")
    assert plan.manifest["stats"]["total_reduce_rows"] == 2 * (c - 1) * 31
    rep = run_spmm(path, nprocs=None if backend == "local" else c, backend=backend, f=16, repeat=1)
    assert rep["allreduce_bytes_match"] and rep["allreduce_bytes_measured"] == c * 31 * 16 * 4
    assert rep["allreduce_bytes_predicted"] == rep["allreduce_bytes_measured"]


@pytest.mark.dist
@pytest.mark.slow
def test_a_torch_distributed_process_exits_without_destructors_but_with_atexit(tmp_path):
    """A CLI process that imported torch.distributed (a torchrun rank) ends with os._exit after its
    atexit handlers (a gloo thread torn down by the C++ destructors ended 1 in 3 torchrun `train gcn`
    ranks with SIGABRT after their report): the handlers still run, the exit code is the command's."""
    marker = tmp_path / "atexit.txt"
    code = ("import atexit, sys; out = sys.argv[1]; atexit.register(lambda: open(out, 'w').write('ran')); "
            "import torch.distributed; sys.argv = ['partplan', '-q', 'datasets', 'list', '--json']; "
            "from partplan.cli.main import main; sys.exit(main())")
    r = subprocess.run([sys.executable, "-c", code, str(marker)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)[0]["name"] and marker.read_text() == "ran"


@pytest.mark.dist
@pytest.mark.slow
def test_torchrun_train_ends_cleanly(tmp_path):
    from tests.scripts import script_beside_python   # (this module is also imported alone, by path)
    exe = script_beside_python("torchrun")
    from partplan.cli.main import main
    pl, data = tmp_path / "pb.plan", tmp_path / "pb.npz"
    assert main(["-q", "datasets", "gcn-data", "polblogs", "-o", str(data)]) == 0
    assert main(["-q", "partition", "polblogs", "-k", "2", "-o", str(tmp_path / "pb.part.2")]) == 0
    assert main(["-q", "plan", "polblogs", "--partition", str(tmp_path / "pb.part.2"), "--normalize", "gcn",
                 "-o", str(pl)]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for _ in range(2):
        r = subprocess.run([str(exe), "--nproc-per-node", "2", "--master-port", str(_port()), "-m", "partplan",
                            "train", "gcn", str(pl), "--data", str(data), "--epochs", "3", "--json"],
                           capture_output=True, text=True, timeout=240, env=env)
        assert r.returncode == 0 and "terminate called" not in r.stderr, r.stderr[-2000:]


def test_a_rank_count_mismatch_says_how_to_start_the_job(monkeypatch):
    """Under the user's torchrun the advice is torchrun's --nproc-per-node (not only --nprocs), under
    partplan's own launcher --nprocs; the plan is named once ("the plan: the plan is for" before)."""
    from partplan.errors import PlanError
    from partplan.runtime.launch import WorkerContext
    ctx = WorkerContext("gloo", "cpu", 5.0, rank=0, world=3)
    monkeypatch.delenv("PARTPLAN_LAUNCHED", raising=False)
    with pytest.raises(PlanError) as ei:
        ctx.check_ranks(2)
    assert str(ei.value).startswith("the plan is for 2 ranks but the job has 3") and "--nproc-per-node 2" in str(ei.value)
    monkeypatch.setenv("PARTPLAN_LAUNCHED", "1")
    with pytest.raises(PlanError, match=r"g\.plan is for 2 ranks .*\(use --nprocs 2\)"):
        ctx.check_ranks(2, "g.plan")
    ctx.check_ranks(3)


@pytest.mark.dist
@pytest.mark.slow
def test_torchrun_ranks_die_when_torchrun_is_killed(tmp_path):
    """torchrun SIGKILLed (a scheduler's hard limit) while its ranks train: the ranks go with it
    (before, they were reparented to init and trained on)."""
    import signal
    import time

    from tests.scripts import script_beside_python   # (this module is also imported alone, by path)
    exe = script_beside_python("torchrun")
    from partplan.cli.main import main
    pl = tmp_path / "pb.plan"
    assert main(["-q", "partition", "polblogs", "-k", "2", "-o", str(tmp_path / "pb.part.2")]) == 0
    assert main(["-q", "plan", "polblogs", "--partition", str(tmp_path / "pb.part.2"), "--normalize", "gcn",
                 "-o", str(pl)]) == 0
    marker = f"partplan-kill-test-{os.getpid()}"
    env = dict(os.environ, OMP_NUM_THREADS="1", PARTPLAN_TEST_MARKER=marker)
    pr = subprocess.Popen([str(exe), "--nproc-per-node", "2", "--master-port", str(_port()), "-m", "partplan",
                           "-q", "train", "gcn", str(pl), "--random-features", "4", "--classes", "2",
                           "--epochs", "100000000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)

    def ranks() -> list[int]:      # the processes of this test's torchrun: its environment's marker
        found = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != pr.pid:
                try:
                    with open(f"/proc/{d}/environ", "rb") as fh:
                        if f"PARTPLAN_TEST_MARKER={marker}".encode() in fh.read():
                            found.append(int(d))
                except OSError:
                    pass
        return found

    try:
        deadline = time.time() + 120
        while len(ranks()) < 2 and time.time() < deadline and pr.poll() is None:
            time.sleep(0.5)
        assert len(ranks()) >= 2, "torchrun did not start its ranks"
        time.sleep(3)      # the ranks are past their start-up (the rendezvous, the plan read)
        pr.send_signal(signal.SIGKILL)
        pr.wait(30)
        deadline = time.time() + 20
        while ranks() and time.time() < deadline:
            time.sleep(0.2)
        assert ranks() == []
    finally:
        for pid in ranks():
            os.kill(pid, signal.SIGKILL)
        if pr.poll() is None:
            pr.kill()
