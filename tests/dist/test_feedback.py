"""First-run feedback: numba's cache lives in the user's cache directory (not in
the installed package) with a one-line notice before the first compile and the
elapsed seconds while it lasts, and a
heartbeat on stderr while a partitioning backend runs."""
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import partplan
from partplan import Graph
from partplan.partition import api, heartbeat

pytest.importorskip("numba")

KERNEL_RUN = """
import numpy as np
from partplan import _kernels as K
assert K.HAVE_NUMBA
assert K.csr_pattern_is_symmetric(np.array([0, 1, 2]), np.array([1, 0]))
"""


# the first run's ticks come every 0.05 s instead of 10 s, and it waits for the ticker's closing line
TICKING_RUN = """
import time
from partplan import _cache
_cache._TICK_S = 0.05
""" + KERNEL_RUN + """
time.sleep(0.5)
"""


def _run(env_extra, tmp_path, script=KERNEL_RUN):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PARTPLAN_QUIET", "XDG_CACHE_HOME")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


def _package_index_files():
    root = Path(partplan.__file__).parent
    return {p for p in root.rglob("_kernels.csr_pattern_is_symmetric-*.nbi")}


@pytest.mark.dist
@pytest.mark.slow
def test_cache_in_user_dir_and_notice_once(tmp_path):
    cache = tmp_path / "cache"
    before = _package_index_files()
    r1 = _run({"PARTPLAN_CACHE": str(cache)}, tmp_path, TICKING_RUN)
    assert r1.returncode == 0, r1.stderr
    assert r1.stderr.count("partplan: compiling kernels (first run only: up to ~") == 1, r1.stderr
    # then the elapsed seconds while it compiles, growing, and one closing line
    ticks = [float(s) for s in re.findall(r"partplan: compiling kernels \.\.\. (\d+) s", r1.stderr)]
    assert ticks and ticks == sorted(ticks), r1.stderr
    done = re.findall(r"partplan: kernels compiled in (\d+) s", r1.stderr)
    assert len(done) == 1 and r1.stderr.rstrip().endswith(f"compiled in {done[0]} s"), r1.stderr
    assert int(done[0]) >= ticks[-1] - 1
    assert list(cache.rglob("_kernels.csr_pattern_is_symmetric-*.nbi"))       # index under PARTPLAN_CACHE
    assert list(cache.rglob("_kernels.csr_pattern_is_symmetric-*.nbc"))
    assert _package_index_files() == before                                   # nothing new in the package
    r2 = _run({"PARTPLAN_CACHE": str(cache)}, tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert "compiling kernels" not in r2.stderr


@pytest.mark.dist
@pytest.mark.slow
def test_quiet_and_existing_numba_cache_dir(tmp_path):
    mine = tmp_path / "numba_mine"
    r = _run({"PARTPLAN_CACHE": str(tmp_path / "unused"), "NUMBA_CACHE_DIR": str(mine),
              "PARTPLAN_QUIET": "1"}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "compiling kernels" not in r.stderr
    assert list(mine.rglob("_kernels.*.nbi")) and not (tmp_path / "unused").exists()


@pytest.mark.dist
@pytest.mark.slow
def test_xdg_cache_home(tmp_path):
    r = _run({"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PARTPLAN_CACHE": ""}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "xdg" / "partplan").rglob("_kernels.*.nbi"))


def test_cache_root_defaults(monkeypatch, tmp_path):
    from partplan import _cache
    monkeypatch.delenv("PARTPLAN_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert _cache.cache_root() == Path.home() / ".cache" / "partplan"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _cache.cache_root() == tmp_path / "partplan"
    monkeypatch.setenv("PARTPLAN_CACHE", str(tmp_path / "pc"))
    assert _cache.cache_root() == tmp_path / "pc"


# ---------------------------------------------------------------- heartbeat around the backend
@pytest.fixture
def graph():
    n = 40
    return Graph.from_edges(np.arange(n - 1), np.arange(1, n), symmetrize=True, n=n)


@pytest.fixture
def fast_beat(monkeypatch):
    monkeypatch.setattr(heartbeat, "HEARTBEAT_FIRST_S", 0.05)
    monkeypatch.setattr(heartbeat, "HEARTBEAT_EVERY_S", 0.05)


def _beats():
    return [t for t in threading.enumerate() if t.name == "partplan-heartbeat"]


def _slow_backend(seen, fail=False):
    def run(backend, model_obj, b, **kw):
        time.sleep(0.4)
        seen.append(len(_beats()))
        if fail:
            raise RuntimeError("backend crashed")
        return np.arange(model_obj.n) % b, {"fake": True}
    return run


def test_heartbeat_while_backend_runs(graph, fast_beat, monkeypatch):
    seen, msgs = [], []
    monkeypatch.setattr(api, "run_backend", _slow_backend(seen))
    api.partition(graph, 2, model="graph", progress=msgs.append)
    beats = [m for m in msgs if m.startswith("partitioning with ") and m.endswith(" s elapsed")]
    assert len(beats) >= 3, msgs
    assert seen == [1] and not _beats()                     # one thread while it ran, none after


def test_heartbeat_stops_on_error(graph, fast_beat, monkeypatch):
    seen, msgs = [], []
    monkeypatch.setattr(api, "run_backend", _slow_backend(seen, fail=True))
    with pytest.raises(RuntimeError, match="backend crashed"):
        api.partition(graph, 2, model="graph", progress=msgs.append)
    assert seen == [1] and not _beats()
    assert any(m.endswith(" s elapsed") for m in msgs)


def test_no_heartbeat_without_progress(graph, fast_beat, monkeypatch):
    seen = []
    monkeypatch.setattr(api, "run_backend", _slow_backend(seen))
    api.partition(graph, 2, model="graph")
    assert seen == [0]


def test_cli_heartbeat_and_quiet(graph, fast_beat, monkeypatch, tmp_path, capsys):
    from partplan.cli.main import main
    from partplan.io import write_graph
    gfile = write_graph(graph, tmp_path / "g.mtx")
    monkeypatch.setattr(api, "run_backend", _slow_backend([]))
    assert main(["partition", str(gfile), "-k", "2", "--engine", "metis"]) == 0
    assert " s elapsed" in capsys.readouterr().err
    assert main(["partition", str(gfile), "-k", "2", "--engine", "metis", "-q"]) == 0
    assert " s elapsed" not in capsys.readouterr().err


def test_heartbeat_while_refine_moves_clusters(fast_beat, monkeypatch):
    """The refinement's cluster-move stage (minutes on R-MAT 22) speaks like its FM passes: a
    heartbeat while it runs and one line with its moves after it."""
    import networkx as nx

    from partplan.partition.refinement import refine as rf
    nxg = nx.random_regular_graph(4, 400, seed=3)
    u, v = np.array(nxg.edges()).T
    g = Graph.from_edges(u, v, symmetrize=True, n=400)
    orig, seen = rf.cluster_moves, []

    def slow(*a, **kw):
        time.sleep(0.4)
        seen.append(len(_beats()))
        return orig(*a, **kw)
    monkeypatch.setattr(rf, "cluster_moves", slow)
    msgs = []
    rf.refine(g, np.arange(400) % 4, 4, seed=1, progress=msgs.append)
    assert seen == [1] and not _beats()
    assert sum(m.startswith("refining max-both (cluster moves): ") and m.endswith(" s elapsed") for m in msgs) >= 3
    done = [m for m in msgs if m.startswith("refine cluster moves: ")]
    assert len(done) == 1 and " kept on " in done[0], msgs


def test_progress_lines_from_threads_stay_whole(monkeypatch):
    """The pipeline refines its starts on several threads that all report: every line arrives
    whole, even through a stream that gives up the GIL between writes."""
    class Yielding:
        def __init__(self):
            self.chunks = []

        def write(self, s):
            time.sleep(0.0005)                 # another thread runs here
            self.chunks.append(s)
            return len(s)

        def flush(self):
            pass
    out = Yielding()
    monkeypatch.setattr(sys, "stderr", out)
    say = heartbeat.StderrProgress()
    threads = [threading.Thread(target=lambda t=t: [say(f"lane {t} line {i}") for i in range(40)]) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = "".join(out.chunks).splitlines()
    assert len(lines) == 160
    assert all(re.fullmatch(r"\[ *\d+\.\ds\] lane \d line \d+", ln) for ln in lines), lines


# ------------------------------------------------------------------ train gcn under --nprocs
def _sbm_case(tmp_path):
    """Two 40-vertex communities (networkx SBM), one-hot features, labels = community."""
    import networkx as nx
    g = nx.stochastic_block_model([40, 40], [[0.25, 0.01], [0.01, 0.25]], seed=3)
    src, dst = np.array(list(g.edges)).T
    n = g.number_of_nodes()
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 40).astype(np.int64)
    train = np.zeros(n, bool)
    train[rng.choice(n, 16, replace=False)] = True
    test = ~train
    np.savez(tmp_path / "d.npz", x=np.eye(n, dtype=np.float32), y=y, train_mask=train,
             val_mask=np.zeros(n, bool), test_mask=test)
    lines = "\n".join(f"{a + 1} {b + 1}" for a, b in zip(src, dst))
    (tmp_path / "g.mtx").write_text("%%MatrixMarket matrix coordinate pattern symmetric\n"
                                    f"{n} {n} {src.size}\n{lines}\n")
    return y, train, test


@pytest.mark.dist
@pytest.mark.slow
def test_train_gcn_nprocs_prints_epochs_and_writes_predictions(tmp_path, capfd):
    pytest.importorskip("torch")
    from partplan.cli.main import main
    y, train, test = _sbm_case(tmp_path)
    plan, pred = tmp_path / "g.plan", tmp_path / "pred.npy"
    assert main(["partition", str(tmp_path / "g.mtx"), "-k", "2", "--model", "graph", "--engine", "random",
                 "--normalize", "gcn", "-q", "-o", str(plan)]) == 0
    capfd.readouterr()
    assert main(["train", "gcn", str(plan), "--nprocs", "2", "--data", str(tmp_path / "d.npz"), "--epochs", "12",
                 "--json", "--predictions", str(pred)]) == 0
    cap = capfd.readouterr()
    epochs = [ln for ln in cap.err.splitlines() if ln.startswith("[train] epoch")]
    assert epochs[0].startswith("[train] epoch 1/12") and epochs[-1].startswith("[train] epoch 12/12")
    import json
    rep = json.loads(cap.out)
    p = np.load(pred)
    assert p.dtype == np.int64 and p.shape == y.shape and set(np.unique(p)) <= {0, 1}
    # the file, read in vertex order against the labels, gives the accuracies the run reported
    # (a random partition permutes the rows: a file in any other order would not)
    assert (p[train] == y[train]).mean() == pytest.approx(rep["train_acc"])
    assert (p[test] == y[test]).mean() == pytest.approx(rep["test_acc"])
    assert not list(tmp_path.glob("*.tmp*")) and not list(tmp_path.glob(".pred*"))
    # -q (no epoch lines from the ranks): test_gcn.py's gloo p = 4 run


_GIL_HOLDER = r"""
import re, sys, time
from partplan.partition import heartbeat as h
h.HEARTBEAT_FIRST_S, h.HEARTBEAT_EVERY_S = 0.05, 0.05
say = h.StderrProgress(quiet=sys.argv[1] == "quiet")
hb = h._heartbeat(say, "engine")
with hb:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.6:      # C calls that hold the GIL, like METIS or KaMinPar
        re.match(r"(a+)+$", "a" * 21 + "b")
print(hb.thread is None, hb.child is not None and hb.child.poll() is not None)
"""


@pytest.mark.parametrize("quiet", [False, True])
@pytest.mark.dist
@pytest.mark.slow
def test_cli_heartbeat_speaks_while_a_c_call_holds_the_gil(quiet):
    """The CLI's heartbeat is a child process: it writes while the engine holds the GIL (a thread
    could not), is reaped when the body ends, and says nothing under -q."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _GIL_HOLDER, "quiet" if quiet else "loud"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    beats = [ln for ln in r.stderr.splitlines() if "partitioning with engine:" in ln and ln.endswith(" s elapsed")]
    if quiet:
        assert beats == [] and r.stdout.split() == ["False", "False"]  # quiet: the thread path, which says nothing
    else:
        assert len(beats) >= 3, r.stderr
        assert r.stdout.split() == ["True", "True"]                    # a child, and it was reaped


_INTERRUPTED = r"""
import re, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # a terminal's Ctrl-C, even when started
                                                           # from a background job (SIGINT ignored)
from partplan.partition import heartbeat as h
h.HEARTBEAT_FIRST_S, h.HEARTBEAT_EVERY_S = 0.05, 0.05
hb = h._heartbeat(h.StderrProgress(), "engine")
try:
    with hb:
        print("started", flush=True)
        while True:
            re.match(r"(a+)+$", "a" * 21 + "b")
except KeyboardInterrupt:
    print("interrupted", hb.child.poll() is not None, flush=True)
    sys.exit(130)
"""


@pytest.mark.dist
@pytest.mark.slow
def test_ctrl_c_to_the_process_group_leaves_no_child_traceback():
    """Ctrl-C reaches the heartbeat child too: it prints nothing and ends with its parent."""
    import os
    import signal
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(0.4)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:                                  # a failed run leaves no spinning process behind
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130 and out.split() == ["interrupted", "True"]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert any(ln.endswith(" s elapsed") for ln in err.splitlines())


@pytest.mark.dist
@pytest.mark.slow
def test_an_interrupted_job_leaves_no_multiprocessing_folder(tmp_path):
    """Ctrl-C to `run spmm --nprocs 2` ends its launcher through os._exit (no exit handlers): the fork
    server's socket folder (pymp-*) stayed in $TMPDIR after every interrupted job (an audit)."""
    import signal
    from pathlib import Path
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    pp = [sys.executable, "-m", "partplan"]
    subprocess.run(pp + ["-q", "partition", "polblogs", "-k", "2", "-o", str(tmp_path / "p.plan")], check=True,
                   env=env, capture_output=True)
    proc = subprocess.Popen(pp + ["run", "spmm", str(tmp_path / "p.plan"), "--nprocs", "2", "--repeat", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert "starting 2" in proc.stderr.readline()
        deadline = time.time() + 60
        while not list(tmp.glob("pymp-*")) and time.time() < deadline:   # the fork server is up
            time.sleep(0.1)
        assert list(tmp.glob("pymp-*")), sorted(p.name for p in tmp.iterdir())
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    time.sleep(1.0)
    assert [p.name for p in Path(tmp).glob("pymp-*")] == []
