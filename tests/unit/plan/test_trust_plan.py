"""Hostile plans (issue 21, plan half): re-signed shards with mutated indices,
sizes and counts, hostile manifests (huge integers, deep nesting, path names,
ANSI escapes), symlinked shards, foreign directories and concurrent writers.

Each case is driven through the Python API and the CLI (``run spmm --backend
local``, ``validate``, ``inspect``, ``export``): the oracle is the exit code
(2), exactly one ``partplan: error:`` line naming the file and field, no
traceback and no file written outside the named output. The cases that used
to kill the process (SIGSEGV, MemoryError) run in a subprocess. Shards are
re-signed the way :mod:`partplan.plan.store` signs them (sha256 of the file,
size), so the checksum passes and only the structure checks can catch them.
"""
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph, PlanError
from partplan.cli.main import main
from partplan.plan import build_plan, load_plan, read_manifest, write_plan
from partplan.runtime.validate import validate_plan

PARTPLAN = [sys.executable, "-m", "partplan"]


def grid(r=8, c=8) -> Graph:
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, name="grid")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    g = grid()
    part = np.arange(g.n) * 4 // g.n
    return g, write_plan(build_plan(g, part, 4), tmp_path_factory.mktemp("base") / "g.plan")


@pytest.fixture
def plan(base, tmp_path):
    import shutil
    g, src = base
    dst = tmp_path / "p.plan"
    shutil.copytree(src, dst)
    return g, dst


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def resign(path: Path, rank: int, arrays=None, meta=None) -> None:
    """Rewrite rank ``rank``'s shard with edited arrays / metadata and record
    its size and sha256 in the manifest exactly as write_plan does."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    f = path / f"rank-{rank:05d}.arrow"
    with pa.memory_map(str(f)) as src:
        r = ipc.open_file(src)
        b = r.get_batch(0)
        old_meta = json.loads(r.schema.metadata[b"partplan"])
        old = {nm: np.array(c.values.to_numpy()) for nm, c in zip(b.schema.names, b.columns)}
    if arrays:
        arrays(old)
    if meta:
        meta(old_meta)
    cols = [pa.LargeListArray.from_arrays(pa.array(np.array([0, a.size], dtype=np.int64)), pa.array(a))
            for a in (old[k] for k in sorted(old))]
    schema = pa.schema([pa.field(k, c.type, nullable=False) for k, c in zip(sorted(old), cols)],
                       metadata={b"partplan": json.dumps(old_meta, sort_keys=True).encode()})
    tmp = f.with_suffix(".new")
    with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, schema) as w:
        w.write_batch(pa.RecordBatch.from_arrays(cols, schema=schema))
    os.replace(tmp, f)
    m = json.loads((path / "manifest.json").read_text())
    m["shards"][rank].update(bytes=f.stat().st_size, sha256=_sha(f))
    (path / "manifest.json").write_text(json.dumps(m))


def edit_manifest(path: Path, fn) -> None:
    m = json.loads((path / "manifest.json").read_text())
    fn(m)
    (path / "manifest.json").write_text(json.dumps(m))


def cli(argv, capsys=None, timeout=120):
    """(exit status, stdout, stderr) of the CLI: in this process with
    ``capsys`` (an exception other than the CLI's own error line fails the
    test), else ``python -m partplan ARGV`` in a subprocess (for the cases
    that used to kill the process)."""
    if capsys is not None:
        capsys.readouterr()
        rc = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return rc, out, err
    r = subprocess.run(PARTPLAN + [str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return r.returncode, r.stdout, r.stderr


def one_error(rc, err, *needles):
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("partplan: error:")]
    assert len(lines) == 1, err
    for s in needles:
        assert s in lines[0], (s, lines[0])
    assert "\x1b" not in err
    return lines[0]


def listing(d: Path) -> set:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


# ----------------------------------------------------------------------------- re-signed shards
def _bigidx(a):
    a["fwd.3.indices"][0] = 10 ** 9


SHARD_CASES = {
    # name: (arrays edit, meta edit, field the error must name)
    "column index 10^9": (_bigidx, None, "fwd.3.indices"),
    "negative gather index": (lambda a: a["fwd.1.idx"].__setitem__(0, -1), None, "fwd.1.idx"),
    "in_id >= n": (lambda a: a["fwd.in_ids"].__setitem__(0, 10 ** 6), None, "fwd.in_ids"),
    "indptr not monotone": (lambda a: a["fwd.3.indptr"].__setitem__(1, 10 ** 6), None, "fwd.3.indptr"),
    "count negative": (lambda a: a["fwd.2.send_counts"].__setitem__(1, -5), None, "fwd.2.send_counts"),
    "count huge": (lambda a: a["fwd.2.recv_counts"].__setitem__(1, 2 ** 62), None, "fwd.2.recv_counts"),
    "indices as floats": (lambda a: a.__setitem__("fwd.3.indices", a["fwd.3.indices"].astype(np.float64)), None,
                          "fwd.3.indices"),
    "buffer of 2^40 rows": (None, lambda m: m["programs"]["forward"]["buffers"].__setitem__("ext", 2 ** 40),
                            "programs.forward.buffers.ext"),
    "in buffer differs from in_ids": (None, lambda m: m["programs"]["forward"]["buffers"].__setitem__("in", 3),
                                      "programs.forward.buffers.in"),
    "prefix renamed": (None, lambda m: m["programs"]["forward"].__setitem__("prefix", "bwd"),
                       "programs.forward.prefix"),
    # a 1D rank whose rows are not written to the output: run spmm wrote its rows of Z as zeros
    "output not written": (None, lambda m: m["programs"]["forward"].__setitem__("writes_output", False),
                           "programs.forward.writes_output"),
}


@pytest.mark.parametrize("case", sorted(SHARD_CASES))
def test_resigned_shard_is_refused_by_every_reader(plan, case, tmp_path):
    g, path = plan
    arrays, meta, fld = SHARD_CASES[case]
    resign(path, 0, arrays, meta)
    with pytest.raises(PlanError, match=r"rank-00000\.arrow: .*" + fld.replace(".", r"\.")):
        load_plan(path, rank=0)
    with pytest.raises(PlanError, match=r"rank-00000\.arrow"):
        load_plan(path)
    rep = validate_plan(path)  # validate reports it (exit 1 in the CLI), never indexes with it
    bad = {c["name"]: c["detail"] for c in rep["checks"] if not c["ok"]}
    assert not rep["ok"] and fld in bad["structure"] and "rank-00000.arrow" in bad["structure"]


def test_index_just_past_the_halo_is_an_error_not_a_wrong_z(plan, tmp_path, capsys):
    g, path = plan
    ext = load_plan(path, rank=0).buffers()["ext"]

    def edit(a):
        a["fwd.3.indices"][0] = ext
    resign(path, 0, edit)
    out = tmp_path / "out"
    out.mkdir()
    before = listing(tmp_path)
    rc, _, err = cli(["run", "spmm", path, "--backend", "local", "-f", "2", "--repeat", "1",
                      "--output", out / "Z.npy"], capsys)
    one_error(rc, err, "rank-00000.arrow", "fwd.3.indices")
    assert listing(tmp_path) == before  # no Z, no temporary left


@pytest.mark.parametrize("case", ["column index 10^9", "buffer of 2^40 rows"])
@pytest.mark.dist
@pytest.mark.slow
def test_run_spmm_on_resigned_shard_is_one_error_in_a_subprocess(plan, case, cli_batch):
    """Used to end in SIGSEGV (exit 139) / a MemoryError traceback: the three
    commands run in a fresh interpreter (one for the three)."""
    arrays, meta, fld = SHARD_CASES[case]
    g, path = plan
    resign(path, 0, arrays, meta)
    (rc, _, err), (rc2, out2, err2), (rc3, _, err3) = cli_batch(
        [["run", "spmm", path, "--backend", "local", "-f", "2", "--repeat", "1"], ["validate", path],
         ["inspect", path, "--rank", "0"]], env={"OMP_NUM_THREADS": "1"})
    one_error(rc, err, "rank-00000.arrow", fld)
    assert rc2 == 1 and "Traceback" not in err2 and "FAIL  structure" in out2 and fld in out2
    one_error(rc3, err3, "rank-00000.arrow", fld)


def test_every_rank_reports_a_quarantined_shard(plan):
    """A rank reading a bad shard alone (load_rank) keeps it quarantined: the
    executor's collective check stops every rank, naming the shard."""
    from partplan.program.plan import manifest_groups
    from partplan.plan.store import load_rank
    from partplan.runtime import Executor, LocalComm
    g, path = plan
    resign(path, 2, _bigidx)
    m = read_manifest(path)
    shards = [load_rank(path, r, manifest=m) for r in range(4)]
    assert shards[2].problems and not shards[0].problems
    with pytest.raises(PlanError, match=r"rank-00002\.arrow"):
        shards[2]["fwd.3.indices"]  # reading through a quarantined shard raises
    with pytest.raises(PlanError, match=r"inconsistent .*rank 2: .*rank-00002\.arrow: forward: fwd\.3\.indices"):
        Executor(m, shards, LocalComm(4, manifest_groups(m)))


def test_graph_n_beyond_the_partition_file_is_refused(plan, tmp_path, capsys):
    g, path = plan
    edit_manifest(path, lambda m: m["graph"].__setitem__("n", 2 ** 32))
    with pytest.raises(PlanError, match=r"manifest\.json: field 'graph\.n' = 4294967296"):
        load_plan(path, rank=1)
    rc, _, err = cli(["run", "spmm", path, "--backend", "local", "-f", "2", "--repeat", "1",
                      "--output", tmp_path / "Z.npy"], capsys)
    one_error(rc, err, "graph.n")
    assert not (tmp_path / "Z.npy").exists()


def test_a_partition_file_that_contradicts_the_shards_is_refused_before_an_export(plan, tmp_path, capsys):
    """One row moved to another part in partition.arrow (perm kept in block order), re-signed, the
    shards untouched: load_plan refuses it, so `export` writes nothing (it wrote the moved row)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    _, path = plan
    f = path / "partition.arrow"
    with pa.memory_map(str(f)) as src:
        r = ipc.open_file(src)
        schema, b = r.schema, r.get_batch(0)
        cols = {nm: np.array(c.values.to_numpy()) for nm, c in zip(b.schema.names, b.columns)}
    part = cols["part"]
    part[int(np.flatnonzero(part == 0)[-1])] = 1
    if "perm" in cols:
        cols["perm"] = np.argsort(part, kind="stable").astype(cols["perm"].dtype)
    arrs = [pa.LargeListArray.from_arrays(pa.array(np.array([0, cols[nm].size], dtype=np.int64)),
                                          pa.array(cols[nm])) for nm in schema.names]
    with pa.OSFile(str(f), "wb") as sink, ipc.new_file(sink, schema) as w:
        w.write_batch(pa.RecordBatch.from_arrays(arrs, schema=schema))
    edit_manifest(path, lambda m: m["partition_file"].update(bytes=f.stat().st_size, sha256=_sha(f)))
    with pytest.raises(PlanError, match="the partition file and the shards are of different plans"):
        load_plan(path)
    rc, _, err = cli(["export", path, tmp_path / "x.part.4", "--to", "metis"], capsys)
    one_error(rc, err, "different plans")
    assert not (tmp_path / "x.part.4").exists()
    assert not validate_plan(path)["ok"]


def test_executor_buffers_checked_against_the_memory_budget(plan, monkeypatch):
    from partplan.runtime.spmm import local_executor
    g, path = plan
    ex = local_executor(path)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "1000")
    with pytest.raises(PlanError, match="memory budget"):
        ex.run("forward", [np.zeros((rp.in_ids().size, 10 ** 4)) for rp in load_plan(path).ranks])


# ----------------------------------------------------------------------------- hostile manifests
def _raw_manifest(path: Path, text: str) -> None:
    (path / "manifest.json").write_text(text)


def test_huge_integer_and_deep_nesting(plan, capsys):
    g, path = plan
    raw = (path / "manifest.json").read_text()
    _raw_manifest(path, raw.replace('"ranks": 4', '"ranks": ' + "9" * 5000, 1))
    with pytest.raises(PlanError, match=r"manifest\.json: .*5000 digits"):
        read_manifest(path)
    rc, _, err = cli(["inspect", path], capsys)
    one_error(rc, err, "manifest.json", "digits")
    _raw_manifest(path, raw.rstrip()[:-1] + ', "deep": ' + "[" * 10_000 + "]" * 10_000 + "}\n")
    with pytest.raises(PlanError, match=r"manifest\.json: JSON nested 10001 levels deep"):
        read_manifest(path)
    for argv in (["validate", path], ["run", "spmm", path, "--backend", "local"], ["inspect", path]):
        rc, _, err = cli(argv, capsys)
        one_error(rc, err, "manifest.json", "nested")


def test_nan_and_strings_with_quotes_and_brackets(plan):
    from partplan.io.trust import json_depth, load_json
    assert json_depth(b'{"a": "[[[[\\"]]]", "b": [1, [2]]}') == 3
    with pytest.raises(PlanError, match="NaN"):
        load_json(b'{"a": NaN}', "x.json")
    g, path = plan
    edit_manifest(path, lambda m: m.__setitem__("model", "[[[{{{\\\"]]"))
    assert read_manifest(path)["model"] == "[[[{{{\\\"]]"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-32"])
def test_an_integer_past_the_limit_is_refused_in_any_encoding_json_reads(encoding):
    """The integer limit's hook runs where the text holds a long digit run, or where NULs (UTF-16 / 32)
    hide one from the byte search; integers within it parse as they are."""
    from partplan.io.trust import load_json
    with pytest.raises(PlanError, match="30 digits"):
        load_json('{"a": [1, -123456789012345678901234567890]}'.encode(encoding), "x.json")
    assert load_json('{"a": [12345678901234567890, "123456789012345678901234"]}'.encode(encoding),
                     "x.json") == {"a": [12345678901234567890, "123456789012345678901234"]}


@pytest.mark.parametrize("name", ["../escaped", "/tmp/abs", "a/b", "..", ".hidden", "-rf", "x\x1b[31m", ""])
def test_graph_name_is_never_a_path(plan, tmp_path, name, capsys):
    g, path = plan
    edit_manifest(path, lambda m: m["graph"].__setitem__("name", name))
    with pytest.raises(PlanError, match=r"manifest\.json: field 'graph\.name'"):
        read_manifest(path)
    before = listing(tmp_path)
    rc, _, err = cli(["export", path, "--to", "dgl", tmp_path / "dgl"], capsys)
    one_error(rc, err, "manifest.json", "graph.name")
    assert listing(tmp_path) == before and not Path("/tmp/abs.json").exists()
    rc, _, err = cli(["validate", path], capsys)
    one_error(rc, err, "graph.name")


def test_export_graph_name_option_is_never_a_path(plan, tmp_path, capsys):
    g, path = plan
    rc, _, err = cli(["export", path, "--to", "dgl", tmp_path / "dgl", "--graph-name", "../up"], capsys)
    one_error(rc, err, "graph_name")
    assert not (tmp_path / "up.json").exists() and not (tmp_path / "dgl").exists()
    rc, _, err = cli(["export", path, "--to", "dgl", tmp_path / "dgl2", "--graph-name", "fine-name"], capsys)
    assert rc == 0 and (tmp_path / "dgl2" / "fine-name.json").is_file(), err


def test_writer_sanitizes_the_graph_name(tmp_path):
    from partplan.io.trust import plain_name, plain_name_problem
    import dataclasses
    g = dataclasses.replace(grid(), name="../we\x1bird/name")
    path = write_plan(build_plan(g, np.arange(g.n) % 2, 2), tmp_path / "s.plan")
    name = read_manifest(path)["graph"]["name"]
    assert name == plain_name("../we\x1bird/name") == "_we_ird_name" and plain_name_problem(name) is None


def test_ansi_in_manifest_strings_is_escaped(plan, capsys):
    g, path = plan
    edit_manifest(path, lambda m: m.update(model="\x1b[2J\x1b[31mEVIL", backend="a\rb"))
    rc, out, err = cli(["inspect", path], capsys)
    assert rc == 0 and "\x1b" not in out and "\r" not in out and "\\x1b[2J" in out
    rc, out, err = cli(["inspect", path, "--json"], capsys)
    assert rc == 0 and "\x1b" not in out
    edit_manifest(path, lambda m: m.update(format="\x1b[31mnot-a-plan"))
    rc, _, err = cli(["validate", path], capsys)
    one_error(rc, err, "manifest.json", "format")


# ----------------------------------------------------------------------------- files and writers
def test_symlinked_shard_is_not_followed(plan, tmp_path, capsys):
    g, path = plan
    target = tmp_path / "elsewhere.arrow"
    os.replace(path / "rank-00001.arrow", target)
    os.symlink(target, path / "rank-00001.arrow")
    with pytest.raises(PlanError, match=r"rank-00001\.arrow: shard of rank 1 is a symbolic link"):
        load_plan(path, rank=1)
    rc, _, err = cli(["validate", path], capsys)
    one_error(rc, err, "rank-00001.arrow", "symbolic link")
    rc, _, err = cli(["inspect", path], capsys)
    one_error(rc, err, "rank-00001.arrow", "symbolic link")


def test_symlinked_manifest_is_not_followed(plan, tmp_path):
    g, path = plan
    os.replace(path / "manifest.json", tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", path / "manifest.json")
    with pytest.raises(PlanError, match="symbolic link"):
        read_manifest(path)


@pytest.mark.parametrize("extra", ["notes.txt", "sub/", "link"])
def test_replacing_refuses_a_directory_that_is_not_only_a_plan(plan, tmp_path, extra):
    g, path = plan
    if extra.endswith("/"):
        (path / extra).mkdir()
    elif extra == "link":
        os.symlink("/etc/passwd", path / "rank-00009.arrow")
    else:
        (path / extra).write_text("mine")
    before = listing(path)
    with pytest.raises(PlanError, match="refusing to overwrite"):
        write_plan(build_plan(g, np.arange(g.n) % 2, 2), path)
    assert listing(path) == before
    # a foreign manifest.json alone is not a plan either
    other = tmp_path / "foreign"
    other.mkdir()
    (other / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(PlanError, match="refusing to overwrite"):
        write_plan(build_plan(g, np.arange(g.n) % 2, 2), other)
    assert (other / "manifest.json").exists()


def test_concurrent_writers_end_in_one_correct_plan(tmp_path):
    g = grid()
    target = tmp_path / "c.plan"
    plans = [build_plan(g, np.arange(g.n) * k // g.n, k) for k in (2, 3, 4, 2, 3, 4)]
    errors = []

    def write(p):
        try:
            write_plan(p, target)
        except PlanError as exc:  # allowed: one clear error
            errors.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - what the test forbids
            errors.append(f"RAW {type(exc).__name__}: {exc}")

    for _ in range(3):
        ts = [threading.Thread(target=write, args=(p,)) for p in plans]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not [e for e in errors if e.startswith("RAW")], errors
        rep = validate_plan(target, g)
        assert rep["ok"], rep["checks"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.plan"]  # no .tmp-* / .old-* left


@pytest.mark.dist
@pytest.mark.slow
def test_concurrent_writer_processes(tmp_path):
    code = ("import sys, numpy as np; sys.path.insert(0, %r); from tests.unit.plan.test_trust_plan import grid; "
            "from partplan.plan import build_plan, write_plan; g = grid(); k = int(sys.argv[1]); "
            "[write_plan(build_plan(g, np.arange(g.n) * k // g.n, k), sys.argv[2]) for _ in range(3)]"
            % str(Path(__file__).resolve().parents[3]))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(k), str(tmp_path / "c.plan")],
                              stderr=subprocess.PIPE, text=True) for k in (2, 3, 4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Traceback" not in err, err
    assert validate_plan(tmp_path / "c.plan", grid())["ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.plan"]


def test_progress_callback_reports_shards(tmp_path):
    import io
    from partplan.plan.store import Progress
    g = grid()
    seen = []
    write_plan(build_plan(g, np.arange(g.n) % 3, 3), tmp_path / "a.plan",
               progress=lambda what, done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    buf = io.StringIO()
    write_plan(build_plan(g, np.arange(g.n) % 3, 3), tmp_path / "a.plan", progress=Progress(buf, every_s=0))
    assert buf.getvalue().splitlines()[-1] == "partplan: writing plan shards 4/4"
    stages = []
    build_plan(g, np.arange(g.n) % 3, 3, progress=lambda what, done, total: stages.append((what, done, total)))
    assert stages == [("building plan", i, 4) for i in range(1, 5)]


def test_error_messages_are_one_line(plan):
    from partplan.errors import PartplanError
    e = PartplanError("a\nb\x1b[0m")
    assert str(e) == "a\\nb\\x1b[0m"


def _edit_manifest(path: Path, **fields) -> None:
    """Set manifest fields (``graph__x`` for graph.x) and re-sign nothing: validate reads the manifest."""
    m = json.loads((path / "manifest.json").read_text())
    for key, val in fields.items():
        if key.startswith("graph__"):
            m["graph"][key[7:]] = val
        else:
            m[key] = val
    (path / "manifest.json").write_text(json.dumps(m))


def test_validate_checks_what_the_manifest_says_of_its_matrix(plan, tmp_path):
    """A tampered graph.source_fingerprint, or "normalize": "mean" on a matrix whose rows do not sum
    to 1, passed validate (exit 0); the shards decide both. The real plans stay valid."""
    g, path = plan
    assert validate_plan(path)["ok"]
    _edit_manifest(path, graph__source_fingerprint="0" * 64)
    rep = validate_plan(path)
    assert not rep["ok"] and any("source_fingerprint" in c["detail"] for c in rep["checks"] if not c["ok"])
    mean = write_plan(build_plan(g, np.arange(g.n) % 4, 4, normalize="mean"), tmp_path / "m.plan")
    assert validate_plan(mean)["ok"]
    _edit_manifest(path, graph__source_fingerprint=read_manifest(path)["graph"]["fingerprint"], normalize="mean")
    # the shards say how their values were normalized: the edited manifest is refused as soon as a
    # shard is read, by validate as by a job (the values' row sums would say it too: "sums to")
    with pytest.raises(PlanError, match="field 'normalize' = 'mean' but the shard of rank 0 holds the input matrix's values"):
        validate_plan(path)
    with pytest.raises(PlanError, match="field 'normalize'"):
        load_plan(path)
    mf = mean / "manifest.json"
    mf.write_text(mf.read_text().replace('"normalize": "mean"', '"normalize": "gcn"'))
    with pytest.raises(PlanError, match="field 'normalize' = 'gcn' but the shard of rank 0 holds 'mean'"):
        load_plan(mean)


def test_export_and_convert_options_that_would_be_wrong_or_ignored(plan, tmp_path, capsys):
    """export --to metis NAME.part.K with K not the plan's row blocks (read back as other parts),
    --symmetrize / --graph-name where they do not apply, validate --weight without --graph, convert
    --no-relabel of a chunked graph (a traceback): one error each, nothing written; a .gt of a
    weighted graph and a decoupled plan's export warn what they drop."""
    g, path = plan
    for argv, needle in ((["export", path, "--to", "metis", tmp_path / "p.part.8"], "name it p.part.4"),
                         (["export", path, "--to", "pyg", tmp_path / "pyg", "--symmetrize"], "--symmetrize"),
                         (["export", path, "--to", "metis", tmp_path / "x.part", "--graph-name", "g"],
                          "--graph-name"),
                         (["validate", path, "--weight", "edge_weight"], "--weight")):
        rc, _, err = cli(argv, capsys)
        one_error(rc, err, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.plan"]
    from partplan.io import write_graph
    from partplan.io.chunked import write_chunked
    write_chunked(g, tmp_path / "g.chunked", chunks=2)
    rc, _, err = cli(["convert", tmp_path / "g.chunked", tmp_path / "g.mtx", "--no-relabel"], capsys)
    one_error(rc, err, "relabel")
    w = Graph(g.indptr, g.indices, np.arange(1, g.nnz + 1, dtype=np.float64), name="w")
    write_graph(w, tmp_path / "w.npz")
    rc, _, err = cli(["-q", "convert", tmp_path / "w.npz", tmp_path / "w.gt"], capsys)
    assert rc == 0 and "partplan: warning:" in err and "edge weights are not written" in err
    dec = tmp_path / "dec.plan"
    assert main(["-q", "partition", str(tmp_path / "w.npz"), "-k", "4", "--ownership", "decoupled",
                 "-o", str(dec)]) == 0
    capsys.readouterr()
    rc, _, err = cli(["-q", "export", dec, "--to", "metis", tmp_path / "dec.part"], capsys)
    assert rc == 0 and "owners" in err and "partplan: warning:" in err
