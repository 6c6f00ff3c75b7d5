"""Bad input around plans and outputs (issue 12 item 5): every class ends in one
PartplanError (CLI: one line, exit 2) decided before the expensive work, never a
traceback and never a silent acceptance.

Classes: output paths (missing / non-folder / unwritable parent, folder where a
file goes, bad suffix) checked before the graph is read; temporaries of writers
killed with SIGKILL removed by the next write; hand-edited manifests (wrong
types, unknown layout or op, path traversal in a shard name, inconsistent
k / ranks / backward / row_bytes); per-shard summaries and stats that disagree
with the shards; option values (objective, f, dtype, time limit) as one
OptionError class.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph, PlanError
from partplan._atomic import STALE_SECONDS, atomic_path, clean_stale, temp_prefix
from partplan.cli.main import main
from partplan.errors import OptionError, OutputPathError, PartplanError
from partplan.io.outpath import check_output_dir, check_output_file, check_output_folder
from partplan.plan import build_plan, read_manifest, write_plan
from partplan.runtime.validate import validate_plan


def grid(r=6, c=6) -> Graph:
    """r x c grid, symmetric pattern."""
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, name="grid")


@pytest.fixture
def plan_path(tmp_path):
    g = grid()
    part = np.arange(g.n) * 4 // g.n
    return g, write_plan(build_plan(g, part, 4), tmp_path / "g.plan")


@pytest.fixture
def mtx(tmp_path):
    from partplan.io import write_graph
    p = tmp_path / "g.mtx"
    write_graph(grid(), p)
    return p


def run_cli(argv, capsys):
    """(exit status, stderr) of the CLI; a traceback fails the test."""
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


# ------------------------------------------------------------------ output paths first
@pytest.mark.parametrize("cmd", [
    ["partition", "{missing_graph}", "-k", "2", "-o", "{out}"],
    ["plan", "{missing_graph}", "--partition", "p.npy", "-o", "{out_plan}"],
    ["convert", "{missing_graph}", "{out_mtx}"],
    ["analyze", "{missing_graph}", "--method", "block", "-k", "2", "--plot", "{out_png}"],
    ["datasets", "generate", "rmat", "--scale", "4", "-o", "{out_mtx}"],
    ["export", "{missing_plan}", "--to", "pyg", "{out}"],
    ["run", "spmm", "{missing_plan}", "--output", "{out_npy}"],
])
@pytest.mark.parametrize("where", ["missing-dir", "parent-is-file"])
def test_output_checked_before_anything_else(tmp_path, capsys, cmd, where):
    """The graph/plan does not exist either: the error is about the output, so
    the output was checked first (before any read, let alone partitioning)."""
    (tmp_path / "afile").write_text("x")
    base = tmp_path / ("nodir" if where == "missing-dir" else "afile")
    fill = {"missing_graph": tmp_path / "nope.mtx", "missing_plan": tmp_path / "nope.plan",
            "out": base / "o.npy", "out_plan": base / "o.plan", "out_mtx": base / "o.mtx",
            "out_png": base / "o.png", "out_npy": base / "o.npy"}
    rc, err = run_cli([c.format(**fill) if "{" in c else c for c in cmd], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert str(base) in err and ("does not exist" in err or "not a directory" in err), err


@pytest.mark.parametrize("argv,match", [
    (["partition", "{g}", "-k", "2", "-o", "{d}/p.mtx"], "unknown partition file suffix .mtx"),
    (["partition", "{g}", "-k", "2", "-o", "{d}"], "is a directory; expected a file name"),
    (["convert", "{g}", "{d}/x.zzz"], "unknown graph file extension .zzz"),
    (["analyze", "{g}", "--method", "block", "-k", "2", "--plot", "{d}/v.jpg"], "NAME.png"),
    (["analyze", "{g}", "--method", "block", "-k", "2", "--save-partition", "{d}/p.graph"], "suffix .graph"),
    (["plan", "{g}", "--partition", "p.npy", "-o", "{d}/x.plan2"], "NAME.plan"),
    (["export", "{d}/nope.plan", "--to", "dgl", "{g}"], "is a file"),
])
def test_bad_output_name_is_one_line(tmp_path, mtx, capsys, argv, match):
    rc, err = run_cli([a.format(g=mtx, d=tmp_path) for a in argv], capsys)
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1, err


def test_output_checks_api(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert check_output_file(tmp_path / "g.part.16", kind="partition").name == "g.part.16"
    assert check_output_file(tmp_path / "g.txt.gz", kind="partition")
    with pytest.raises(OutputPathError, match="may be compressed, not .npy.gz"):
        check_output_file(tmp_path / "g.npy.gz", kind="partition")
    with pytest.raises(OutputPathError, match="is a directory"):
        check_output_file(tmp_path / "full", kind="any")
    with pytest.raises(OutputPathError, match="not empty"):
        check_output_dir(tmp_path / "full")
    (tmp_path / "full.plan").mkdir()
    (tmp_path / "full.plan" / "y").write_text("")
    with pytest.raises(OutputPathError, match="nor a plan directory"):
        check_output_file(tmp_path / "full.plan", kind="partition")
    assert check_output_folder(tmp_path / "a" / "b")     # created later with its parents
    with pytest.raises(OutputPathError, match="empty"):
        check_output_file("")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partplan-probe")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_folder(tmp_path):  # pragma: no cover - CI runs as a user
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(OutputPathError, match="not writable"):
            check_output_file(d / "x.npy", kind="npy")
    finally:
        d.chmod(0o700)


# ------------------------------------------------------------------ temporaries of dead writers
def _killed_writer(path: Path, kind: str) -> Path:
    """A real child process that makes a temporary of ``path`` the way the writers
    name theirs and then dies by SIGKILL; returns the leftover."""
    code = ("import os, signal, sys, tempfile\n"
            "from partplan._atomic import temp_prefix\n"
            f"p = {str(path)!r}\n"
            f"t = tempfile.mkdtemp(prefix=temp_prefix(p), dir={str(path.parent)!r}) if {kind == 'dir'} else "
            f"tempfile.mkstemp(prefix=temp_prefix(p), suffix='.tmp', dir={str(path.parent)!r})[1]\n"
            "open(os.path.join(t, 'rank-00000.arrow') if os.path.isdir(t) else t, 'w').write('half')\n"
            "print(t, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = Path(proc.stdout.strip())
    assert left.exists()
    return left


@pytest.mark.dist
@pytest.mark.slow
def test_stale_plan_tempdir_removed_on_next_write(tmp_path):
    g = grid()
    target = tmp_path / "g.plan"
    dead = _killed_writer(target, "dir")
    live = tmp_path / f"{temp_prefix(target)}keepme00"      # this process: a live writer
    live.mkdir()
    legacy_old = tmp_path / ".g.plan.tmp-abcd1234"            # an older partplan's name, no pid
    legacy_old.mkdir()
    old = time.time() - STALE_SECONDS - 60
    os.utime(legacy_old, (old, old))
    legacy_new = tmp_path / ".g.plan.tmp-efgh5678"
    legacy_new.mkdir()
    other = tmp_path / ".h.plan.tmp-999999999-abcdefgh"       # another target's: not ours to touch
    other.mkdir()
    write_plan(build_plan(g, np.arange(g.n) % 2, 2), target)
    assert not dead.exists() and not legacy_old.exists()
    assert live.exists() and legacy_new.exists() and other.exists()
    assert validate_plan(target, g)["ok"]


@pytest.mark.dist
@pytest.mark.slow
def test_stale_file_temp_removed_by_atomic_writer(tmp_path):
    target = tmp_path / "p.npy"
    dead = _killed_writer(target, "file")
    with atomic_path(target, suffix=".npy") as tmp:
        np.save(tmp, np.arange(3))
    assert not dead.exists() and np.load(target).tolist() == [0, 1, 2]
    assert clean_stale(target) == []


# ------------------------------------------------------------------ hand-edited manifests
def _edit(path: Path, fn) -> None:
    m = json.loads((path / "manifest.json").read_text())
    fn(m)
    (path / "manifest.json").write_text(json.dumps(m))


def _set(*path):
    """Edit setting manifest[path[0]][path[1]]... = path[-1]."""
    *keys, value = path

    def fn(m):
        o = m
        for k in keys[:-1]:
            o = o[k]
        o[keys[-1]] = value
    return fn


def _step(i, key, value):
    return _set("programs", "forward", "steps", i, key, value)


MANIFEST_EDITS = [
    ("k", _set("k", 5), "'k' = 5 differs from 'ranks'"),
    ("ranks+k", lambda m: m.update(k=8, ranks=8), "'row_blocks'"),
    ("layout", _set("layout", "3d:2"), "field 'layout'"),
    ("layout type", _set("layout", 7), "'layout' must be str"),
    ("layout_params", _set("layout_params", {"c": 2}), "'layout_params'"),
    ("f", _set("f", "128"), "'f' must be an integer"),
    ("dtype", _set("dtype", "float7"), "'dtype'"),
    ("row_bytes", _set("row_bytes", 4), "'row_bytes' = 4"),
    ("backward", _set("backward", "separate"), "'backward' = 'separate'"),
    ("ownership", _set("ownership", "shared"), "'ownership'"),
    ("stats type", _set("stats", [1, 2]), "'stats'"),
    ("op list", _step(1, "op", ["gather"]), "'programs.forward.steps[1].op'"),
    ("op unknown", _step(1, "op", "teleport"), "not a known step"),
    ("src type", _step(1, "src", {"a": 1}), "steps[1].src"),
    ("dst_row missing", lambda m: m["programs"]["forward"]["steps"][2].pop("dst_row"), "steps[2].dst_row"),
    ("dst_row negative", _step(0, "dst_row", -1), "steps[0].dst_row"),
    ("arrays", _step(1, "arrays", [1]), "steps[1].arrays"),
    ("pairs huge", lambda m: m["programs"]["forward"]["steps"][2]["pairs"][0].__setitem__(2, 10**19), "pairs"),
    ("group", _step(2, "group", ["a"]), "steps[2].group"),
    ("extra step key", _step(1, "evil", 1), "unknown key"),
    ("shard path", lambda m: m["shards"][0].__setitem__("file", "../../etc/passwd"), "shards[0].file"),
    ("partition file", lambda m: m["partition_file"].__setitem__("file", 3), "partition_file"),
    ("graph.n", _set("graph", "n", "36"), "'graph.n' must be an integer"),
    ("graph.directed", _set("graph", "directed", "no"), "graph.directed"),
    ("program name", lambda m: m["programs"].__setitem__("sideways", {"same_as": "forward"}), "programs.sideways"),
]


@pytest.mark.parametrize("name,fn,match", MANIFEST_EDITS, ids=[e[0] for e in MANIFEST_EDITS])
def test_edited_manifest_is_one_error(plan_path, capsys, name, fn, match):
    g, path = plan_path
    _edit(path, fn)
    with pytest.raises(PlanError, match=match.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        read_manifest(path)
    for cmd in (["validate", path], ["inspect", path], ["export", path, "--to", "metis", path.parent / "x.part"]):
        rc, err = run_cli(cmd, capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "manifest.json" in err, (cmd, err)


@pytest.mark.parametrize("edit,field", [
    (lambda m: m["shards"][1].__setitem__("send_rows", m["shards"][1]["send_rows"] + 1), "shards[1].send_rows"),
    (lambda m: m["shards"][0].__setitem__("halo", 0), "shards[0].halo"),
    (lambda m: m["shards"][3].__setitem__("nnz", 1), "shards[3].nnz"),
    (lambda m: m["stats"].__setitem__("max_send", m["stats"]["max_send"] - 1), "stats.max_send"),
    (lambda m: m["stats"].__setitem__("total_volume", 1), "stats.total_volume"),
    (lambda m: m["stats"].__setitem__("compute_imbalance", 0.5), "stats.compute_imbalance"),
    (lambda m: m["graph"].__setitem__("weighted", True), "graph.weighted"),
    (lambda m: m["graph"].__setitem__("symmetric", False), "graph.symmetric"),
])
def test_recorded_figures_recounted(plan_path, capsys, edit, field):
    """A manifest whose summaries or stats were edited loads (types are fine) but
    fails validate's manifest check, which recounts them from the shards."""
    g, path = plan_path
    assert validate_plan(path, replay_check=False)["ok"]
    _edit(path, edit)
    rep = validate_plan(path, replay_check=False)
    check = {c["name"]: c for c in rep["checks"]}["manifest"]
    assert not rep["ok"] and not check["ok"] and field in check["detail"], check
    rc, err = run_cli(["validate", path, "--no-replay"], capsys)
    assert rc == 1


@pytest.mark.parametrize("layout,k,owner", [("1.5d:2", 4, False), ("2d:2x2", 4, False), ("1d", 3, True)])
def test_recount_agrees_on_every_layout(tmp_path, layout, k, owner):
    """No false alarm: the recount equals what the builder recorded (1.5D, 2D,
    decoupled ownership on a directed weighted graph with a separate backward)."""
    rng = np.random.default_rng(3)
    g = Graph.from_edges(rng.integers(0, 40, 160), rng.integers(0, 40, 160), rng.random(160) + 0.5, n=40)
    if owner:
        from partplan.partition.refinement.ownership import assign_owners
        part = rng.integers(0, k, g.n)
        plan = build_plan(g, part, k, owner=assign_owners(g, part, k, method="greedy"))
    else:
        from partplan.layouts import parse_layout
        part = rng.integers(0, parse_layout(layout, k).row_blocks, g.n)
        plan = build_plan(g, part, k, layout=layout)
    path = write_plan(plan, tmp_path / "x.plan")
    rep = validate_plan(path, g)
    assert rep["ok"], rep["checks"]
    assert any(c["name"] == "manifest" and c["ok"] for c in rep["checks"])


def test_manifest_field_sweep_never_tracebacks(plan_path):
    """Every manifest field set to every JSON type (or removed): loading and
    validating raise PlanError or succeed — nothing else escapes."""
    g, path = plan_path
    base = json.loads((path / "manifest.json").read_text())
    values = [None, -1, 10**19, 1.5, "x", True, [], {"a": 1}]

    def leaves(o, pre=()):
        yield pre
        if isinstance(o, dict):
            for k, v in o.items():
                yield from leaves(v, pre + (k,))
        elif isinstance(o, list):
            for i, v in enumerate(o[:2]):
                yield from leaves(v, pre + (i,))

    tried = 0
    for keys in list(leaves(base))[1:]:
        if keys[0] in ("groups",) or (keys[0] == "programs" and len(keys) > 5):
            continue
        for v in values:
            m = json.loads(json.dumps(base))
            o = m
            for k in keys[:-1]:
                o = o[k]
            o[keys[-1]] = v
            (path / "manifest.json").write_text(json.dumps(m))
            tried += 1
            try:
                validate_plan(path, replay_check=False)
            except PlanError:
                pass
    assert tried > 300


# ------------------------------------------------------------------ option values: one class
def test_bad_objective_is_one_class_everywhere():
    from partplan import partition
    from partplan.partition.refinement.ownership import assign_owners, owner_lower_bound
    from partplan.partition.refinement.refine import refine
    g = grid()
    part = np.arange(g.n) % 2
    calls = [lambda: partition(g, 2, objective="max"), lambda: refine(g, part, 2, objective="max"),
             lambda: assign_owners(g, part, 2, objective="max"), lambda: owner_lower_bound(g, part, 2, objective="x")]
    for call in calls:
        with pytest.raises(OptionError, match="objective"):
            call()


@pytest.mark.parametrize("call,match", [
    (lambda g: __import__("partplan").analyze(g, np.arange(g.n) % 2, f=0), "feature width"),
    (lambda g: __import__("partplan").analyze(g, np.arange(g.n) % 2, dtype="float7"), "dtype"),
    (lambda g: __import__("partplan").partition(g, 2, backend="block", f=0), "feature width"),
    (lambda g: __import__("partplan").partition(g, 2, objective="max-both", time_limit=-1), "time_limit"),
    (lambda g: __import__("partplan").partition(g, 2, model="stochastic", theta=0), "theta"),
    (lambda g: __import__("partplan").partition(g, 2, model="stochastic", sampler="bogus"), "sampler"),
    (lambda g: build_plan(g, np.arange(g.n) % 2, 2, dtype="float7"), "dtype"),
])
def test_bad_option_values_are_option_errors(call, match):
    with pytest.raises(OptionError, match=match) as info:
        call(grid())
    assert isinstance(info.value, (PartplanError, ValueError))


def test_bad_dtype_fails_before_partitioning(mtx, capsys):
    rc, err = run_cli(["partition", mtx, "-k", "2", "--dtype", "float7", "-q"], capsys)
    assert rc == 2 and "unknown dtype 'float7'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["--preset", "fast"], ["--preset", "FAST", "--engine", "metis"]])
def test_cli_preset_fast(tmp_path, mtx, capsys, argv):
    rc = main(["partition", str(mtx), "-k", "4", "-q", "--json", "-o", str(tmp_path / "p.npy")] + argv)
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["backend"] == "metis" and out["model"] == "graph" and out["params"]["preset"] == "fast"
    assert "volume_refine" in out["info"]
    rc, err = run_cli(["partition", mtx, "-k", "4", "--preset", "fast", "--model", "hypergraph"], capsys)
    assert rc == 2 and "preset 'fast'" in err


# ----------------------------------------------------------------------------- found by a CLI-wide bad-input sweep
def test_run_spmm_features_archive_or_nonfinite_is_one_error(plan_path, tmp_path, capsys):
    g, plan = plan_path
    np.savez(tmp_path / "h.npz", x=np.zeros((g.n, 2)))
    rc, err = run_cli(["run", "spmm", plan, "--backend", "local", "--feature-file", tmp_path / "h.npz"], capsys)
    assert rc == 2 and "not a .npy array" in err and "h.npz" in err
    H = np.zeros((g.n, 3))
    H[7, 2] = np.nan
    np.save(tmp_path / "h.npy", H)
    rc, err = run_cli(["run", "spmm", plan, "--backend", "local", "--feature-file", tmp_path / "h.npy"], capsys)
    assert rc == 2 and "H[7, 2]" in err and "not finite" in err


def test_each_rank_checks_the_feature_rows_it_reads(tmp_path):
    """Under torchrun no process scans all of H first: every rank checks its own rows."""
    from partplan.runtime.spmm import _input_rows

    H = np.arange(30, dtype=np.float32).reshape(10, 3)
    H[5, 1] = np.inf
    np.save(tmp_path / "h.npy", H)
    cfg = {"features": str(tmp_path / "h.npy")}
    rows = _input_rows(cfg, np.array([9, 0, 3]), 10, np.float32)
    assert np.array_equal(rows, H[[9, 0, 3]])
    with pytest.raises(PlanError, match=r"H\[5, 1\] = inf is not finite"):
        _input_rows(cfg, np.array([3, 5, 7]), 10, np.float32)


def test_float64_features_beyond_float32_are_named_before_the_cast(tmp_path):
    """--dtype float32 over float64 features holding 1e300: the cast made inf and the program
    failed later as 'a non-finite value' with numpy's overflow warning; the launcher's scan and each
    rank's own rows name the entry and the dtype instead (float64 runs it)."""
    import warnings

    from partplan.runtime.spmm import _input_rows, check_finite_features
    H = np.arange(30, dtype=np.float64).reshape(10, 3)
    H[6, 2] = -1e300
    np.save(tmp_path / "h.npy", H)
    cfg = {"features": str(tmp_path / "h.npy")}
    with pytest.raises(PlanError, match=r"H\[6, 2\] = -1e\+300 is beyond float32's largest finite .*--dtype float64"):
        check_finite_features(H, tmp_path / "h.npy", dtype="float32")
    check_finite_features(H, tmp_path / "h.npy", dtype="float64")
    check_finite_features(H, tmp_path / "h.npy")                  # the run's dtype is H's own
    with warnings.catch_warnings():
        warnings.simplefilter("error")                           # no numpy overflow warning either
        with pytest.raises(PlanError, match=r"H\[6, 2\] = -1e\+300 is beyond float32"):
            _input_rows(cfg, np.array([6, 1]), 10, np.float32)
        assert np.array_equal(_input_rows(cfg, np.array([6, 1]), 10, np.float64), H[[6, 1]])
        assert np.array_equal(_input_rows(cfg, np.array([1, 0]), 10, np.float32), H[[1, 0]].astype(np.float32))


def test_inspect_refuses_a_missing_or_truncated_shard(plan_path, capsys):
    _, plan = plan_path
    m = read_manifest(plan)
    shard = Path(plan) / m["shards"][1]["file"]
    shard.write_bytes(shard.read_bytes()[:-10])
    rc, err = run_cli(["inspect", plan], capsys)
    assert rc == 2 and "shard of rank 1 truncated" in err
    shard.unlink()
    rc, err = run_cli(["inspect", plan], capsys)
    assert rc == 2 and "shard of rank 1 is missing" in err


def test_train_labels_that_are_not_class_indices_are_one_error(tmp_path, capsys):
    from partplan.nn.data import check_data, write_data
    n = 6
    masks = [np.array(m, bool) for m in ([1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1])]
    write_data(tmp_path / "d.npz", np.ones((n, 3), np.float32), np.array([0, 10**12, 0, 1, 0, 1]), *masks)
    with pytest.raises(PartplanError, match="vertex 1 has label 1000000000000"):
        check_data(tmp_path / "d.npz", n)


def test_bench_refuses_an_unknown_dataset_before_any_work(capsys):
    rc, err = run_cli(["bench", "--datasets", "email-Enron", "nope", "--k", "2", "-q"], capsys)
    assert rc == 2 and "nope" in err
    rc, err = run_cli(["bench", "--datasets", "rmat99", "--k", "2", "-q"], capsys)
    assert rc == 2 and "rmat99" in err


def test_an_undirected_graph_whose_pattern_is_not_symmetric_is_refused_before_planning(tmp_path):
    """``Graph(..., directed=False)`` asserts a symmetric pattern; a plan of one that is not would
    record "directed": false of a matrix its own validator finds asymmetric. build_plan refuses it,
    naming the flag."""
    import numpy as np

    from partplan import Graph, build_plan
    from partplan.errors import PlanError
    g = Graph(np.array([0, 1, 1, 1]), np.array([1]), directed=False)     # A[0, 1] alone
    with pytest.raises(PlanError, match=r"directed=False.*not symmetric"):
        build_plan(g, np.array([0, 1, 2]))
    ok = Graph(np.array([0, 1, 2, 2]), np.array([1, 0]), directed=False)
    assert build_plan(ok, np.array([0, 1, 2])).manifest["graph"]["directed"] is False


@pytest.mark.parametrize("delta", [1, -1])
def test_a_manifest_whose_row_count_was_edited_is_refused_by_each_rank(plan_path, delta):
    """graph.n one off (within what the partition file's bytes could hold): each rank's reader, a
    job's row count and the whole plan refuse it against the n values of the partition file's
    one record (read from its message header; the job sized its buffers by n and trained on)."""
    from partplan.plan.store import load_plan, load_rank, plan_rows

    g, path = plan_path
    _edit(path, lambda m: m["graph"].__setitem__("n", g.n + delta))
    for call in (lambda: load_rank(path, 1), lambda: plan_rows(path), lambda: load_plan(path)):
        with pytest.raises(PlanError, match=rf"'graph.n' = {g.n + delta} but the partition file partition.arrow "
                                            rf"holds {g.n} rows"):
            call()


def test_plan_values_beyond_float32_are_one_line_naming_them(tmp_path, capsys):
    """An edge weight of 1e308 cast to float32 printed numpy's overflow warning beside the error,
    whose advice named H alone."""
    import warnings

    g = Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([1e308, 2.0, 3.0]), symmetrize=True)
    plan = tmp_path / "w.plan"
    from partplan.plan import build_plan, write_plan
    write_plan(build_plan(g, np.array([0, 0, 1, 1]), 2), plan)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)          # numpy's overflow warning would raise here
        rc, err = run_cli(["-q", "run", "spmm", plan, "--backend", "local", "--dtype", "float32"], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert "beyond float32's largest finite" in err and "the plan's values" in err
