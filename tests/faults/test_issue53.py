"""Faults seen from outside (issue #53): each case ends in exit 2 with one
``partplan: error:`` line naming the file, field, argument or variable (or
one ``partplan: interrupted`` line), never a traceback, a crash or a raw
escape sequence on the terminal."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from errlines import one_line, run_cli

PARTPLAN = [sys.executable, "-m", "partplan"]


# ----------------------------------------------------------------------------- (e) sizes from arguments
@pytest.mark.parametrize("spec", ["tree:1000000x1000000", "tree:4294967296x4294967296"])
def test_huge_topology_preset_is_refused_before_allocation(spec, capsys, monkeypatch):
    """More ranks than a job runs: one error line, nothing allocated (a tree's matrices are built
    when read; tests/unit/graph/test_topology_inputs.py checks that reading one past the memory
    budget is refused)."""
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "64M")
    rc, out, err = run_cli(["topology", "show", spec], capsys)
    one_line(rc, err, 2, spec, "ranks, more than a job runs")
    assert out == ""


def test_topology_preset_with_a_5000_digit_fanout_is_one_error(capsys):
    rc, _, err = run_cli(["topology", "show", "tree:" + "9" * 5000 + "x2"], capsys)
    one_line(rc, err, 2, "preset", "18 digits")


def test_matrix_topology_whose_fanouts_lie_is_refused_before_the_tree(tmp_path, capsys):
    import json
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"kind": "matrix", "cost": [[0, 1], [1, 0]], "fanouts": [1000000, 1000000]}))
    rc, _, err = run_cli(["topology", "show", f], capsys)
    one_line(rc, err, 2, "t.json", "fanouts")


# ----------------------------------------------------------------------------- (f) SOURCE_DATE_EPOCH
@pytest.mark.dist
def test_malformed_source_date_epoch_is_one_error_naming_it(tmp_path):
    """numpy's f2py reads the variable at import: the CLI checks it before importing anything."""
    bad = ["abc", "253402300800", "9" * 30, "1e9", " 12", "", "-1", "\x1b[31m"]
    code = ("import os, sys\nfrom partplan.cli.main import main\nres = []\n"
            "for v in sys.argv[1:]:\n"
            "    os.environ['SOURCE_DATE_EPOCH'] = v\n"
            "    res.append(str(main(['topology', 'show', 'tree:2x2'])))\n"
            "print(' '.join(res))\n")
    r = subprocess.run([sys.executable, "-c", code, *bad], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["2"] * len(bad), r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == len(bad) and "Traceback" not in r.stderr, r.stderr
    assert all(ln.startswith("partplan: error: SOURCE_DATE_EPOCH = ") for ln in lines)
    assert "\x1b" not in r.stderr and "\\x1b[31m" in lines[-1]
    ok = subprocess.run(PARTPLAN + ["topology", "show", "tree:2x2"], capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, SOURCE_DATE_EPOCH="253402300799"))
    assert ok.returncode == 0, ok.stderr


def test_source_date_epoch_sets_created_up_to_the_year_9999(tmp_path, monkeypatch):
    from partplan.plan.store import stamp_created
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300799")
    m = {}
    stamp_created(m, None)
    assert m["created"] == "9999-12-31T23:59:59+00:00"
    from partplan.errors import PartplanError
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300800")
    with pytest.raises(PartplanError, match="SOURCE_DATE_EPOCH"):
        stamp_created({}, None)


# ----------------------------------------------------------------------------- (b), (c) full disk, read-only folder
def _plan(tmp_path):
    import numpy as np

    from partplan import Graph
    from partplan.plan import build_plan, write_plan
    rng = np.random.default_rng(1)
    g = Graph.from_edges(rng.integers(0, 64, 300), rng.integers(0, 64, 300), n=64, symmetrize=True, name="r")
    return g, write_plan(build_plan(g, np.arange(64) % 2, 2), tmp_path / "g.plan")


@pytest.mark.parametrize("to", ["dgl", "pyg"])
def test_export_on_a_full_tmpfs_is_one_error_and_leaves_nothing(to, tmp_path, tmpfs, capsys):
    if to == "pyg":
        pytest.importorskip("torch")
    _, plan = _plan(tmp_path)
    d = tmpfs("size=256k")
    tmpfs.fill(d, 4096)
    rc, out, err = run_cli(["export", plan, "--to", to, d / "out"], capsys)
    one_line(rc, err, 2, str(d / "out"), "not enough space", "nothing written")
    assert sorted(p.name for p in d.iterdir()) == ["pad"]


@pytest.mark.parametrize("to,short", [("dgl", OSError("1024 requested and 496 written")),
                                      ("dgl", OSError(28, "No space left on device")),
                                      ("pyg", RuntimeError("[enforce fail at inline_container.cc:672] . "
                                                           "unexpected pos 704 vs 598"))])
def test_export_short_writes_are_one_error(to, short, tmp_path, capsys, monkeypatch):
    """Without a tmpfs: numpy's and torch's own words for a full disk, injected."""
    import numpy as np
    _, plan = _plan(tmp_path)

    def full(*a, **kw):
        raise short
    if to == "pyg":
        torch = pytest.importorskip("torch")
        monkeypatch.setattr(torch, "save", full)
    else:
        monkeypatch.setattr(np, "save", full)
    rc, _, err = run_cli(["export", plan, "--to", to, tmp_path / "out"], capsys)
    one_line(rc, err, 2, str(tmp_path / "out"), "nothing written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.plan"]


def test_chunked_convert_into_a_read_only_folder_is_one_error(tmp_path, tmpfs, capsys):
    d = tmpfs("size=64k,ro")
    rc, _, err = run_cli(["convert", "polblogs", d / "g.chunks", "--chunks", 2], capsys)
    one_line(rc, err, 2, str(d / "g.chunks"), "not writable", "Read-only file system")


def test_chunked_writer_in_a_read_only_folder_is_one_error(tmp_path, monkeypatch):
    """The library path (no CLI pre-check), with EROFS injected at the temporary folder."""
    import errno
    import tempfile

    from partplan.errors import OutputPathError
    from partplan.io.chunked import write_chunked
    g, _ = _plan(tmp_path)

    def ro(*a, **kw):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(tempfile, "mkdtemp", ro)
    with pytest.raises(OutputPathError, match="g.chunks: directory .* is not writable .Read-only file system"):
        write_chunked(g, tmp_path / "g.chunks", chunks=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.plan"]


# ----------------------------------------------------------------------------- the DGL reader's string fields
def _dgl_export(tmp_path):
    from partplan.interop.export import export_plan
    g, plan = _plan(tmp_path)
    return g, export_plan(plan, "dgl", tmp_path / "dgl")


@pytest.mark.dist
def test_hostile_dgl_strings_are_one_error_never_a_crash(tmp_path, cli_batch):
    """Lone surrogates (not encodable as a file name or on a terminal), strings, infinities and
    lists where DGL's config and partition_meta.json hold numbers. The process entry
    (``python -m partplan``) leaves without C++ static destructors after the error line."""
    import json
    import shutil

    from partplan.io import write_graph
    g, out = _dgl_export(tmp_path)
    write_graph(g, tmp_path / "g.mtx")
    cfg = json.loads((out / "r.json").read_text())
    cases = {}
    for name, text in {"np_str": '{"num_parts": "abc"}', "np_inf": '{"num_parts": 1e999}',
                       "np_sur": '{"num_parts": "\\ud800"}', "np_list": '{"num_parts": [1]}'}.items():
        d = tmp_path / name
        shutil.copytree(out / "partition_assignment", d)
        (d / "partition_meta.json").write_text(text)
        cases[name] = (d, "partition_meta.json", "num_parts")
    for name, value in {"nm_sur": "\ud800.npy", "nm_esc": "\x1b[31m.npy"}.items():
        d = tmp_path / name
        shutil.copytree(out, d)
        (d / "r.json").write_text(json.dumps(dict(cfg, node_map=value)))
        cases[name] = (d, "r.json", "node_map")
    res = cli_batch([["plan", tmp_path / "g.mtx", "--partition", d, "-o", tmp_path / f"{name}.plan"]
                     for name, (d, _, _) in cases.items()], timeout=300)
    for (name, (d, f, field)), (rc, _, err) in zip(cases.items(), res):
        line = one_line(rc, err, 2, f, field)
        assert "\x1b" not in err and "\ud800" not in err, (name, line)
    d, _, _ = cases["np_inf"]
    r = subprocess.run(PARTPLAN + ["plan", tmp_path / "g.mtx", "--partition", d, "-o", tmp_path / "x.plan"],
                       capture_output=True, text=True, timeout=120)
    one_line(r.returncode, r.stderr, 2, "partition_meta.json", "num_parts")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".plan") == ["g.plan"]


def test_printable_escapes_lone_surrogates_and_plain_names_refuse_them():
    from partplan.errors import PlanError
    from partplan.io.trust import plain_name_problem, printable
    assert printable("a\udcffb") == "a\\udcffb"
    assert plain_name_problem("\ud800.npy")
    assert str(PlanError("x\udcff")) == "x\\udcff"
    "".join(printable("\udcff")).encode("utf-8")     # printable on any UTF-8 terminal


# ----------------------------------------------------------------------------- (d) sparse and meta edge_index
def _bad_datas():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data
    ei = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 0], [1, 0, 2, 1, 3, 2, 0, 3]])
    return {"sparse": Data(edge_index=ei.to_sparse(), num_nodes=4, x=torch.randn(4, 8)),
            "sparse_csr": Data(edge_index=ei.to_sparse_csr(), num_nodes=4),
            "meta": Data(edge_index=torch.empty((2, 10 ** 12), dtype=torch.long, device="meta"), num_nodes=4),
            "meta_no_n": Data(edge_index=torch.empty((2, 10 ** 12), dtype=torch.long, device="meta"))}


@pytest.mark.parametrize("kind", ["sparse", "sparse_csr", "meta", "meta_no_n"])
def test_sparse_or_meta_edge_index_is_one_error_through_every_entry(kind, tmp_path, capsys):
    import torch

    import partplan
    from partplan.errors import GraphFormatError
    from partplan.io._pyg import edge_index_array
    data = _bad_datas()[kind]
    word = "meta" if kind.startswith("meta") else "sparse"
    for call in (lambda: partplan.from_pyg(data), lambda: partplan.plan_from_pyg(data, 2),
                 lambda: edge_index_array(data, "data")):
        with pytest.raises(GraphFormatError, match=f"edge_index.*{word}"):
            call()
    torch.save(data, tmp_path / "d.pt")
    rc, _, err = run_cli(["analyze", tmp_path / "d.pt", "--method", "metis", "-k", 2], capsys)
    one_line(rc, err, 2, "d.pt", "edge_index", word)


@pytest.mark.parametrize("kind", ["sparse", "meta"])
def test_sparse_or_meta_edge_index_through_halo(kind, tmp_path):
    import torch
    from torch_geometric.data import Data

    import partplan
    import partplan.nn
    from partplan.errors import PartplanError
    ei = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 0], [1, 0, 2, 1, 3, 2, 0, 3]])
    partplan.plan_from_pyg(Data(edge_index=ei, num_nodes=4), 1, out=tmp_path / "p.plan")
    with pytest.raises(PartplanError, match="edge_index"):
        partplan.nn.LocalHalo(tmp_path / "p.plan", _bad_datas()[kind])


# ----------------------------------------------------------------------------- terminal injection
def test_output_names_with_escape_sequences_are_shown_escaped(tmp_path, capsys, monkeypatch):
    from partplan.io import write_graph
    g, _ = _plan(tmp_path)
    write_graph(g, tmp_path / "g.mtx")
    monkeypatch.chdir(tmp_path)
    esc = "\x1b[31m"
    cmds = [["partition", "g.mtx", "-k", 2, "-o", f"o{esc}.plan"],
            ["partition", "g.mtx", "-k", 2, "--objective", f"x{esc}"],
            ["plan", "g.mtx", "--partition", f"o{esc}.plan", "-o", f"p{esc}.plan"],
            ["convert", "g.mtx", f"c{esc}.mtx"],
            ["convert", "g.mtx", f"c{esc}.chunks", "--chunks", 2],
            ["export", f"o{esc}.plan", "--to", "dgl", f"e{esc}"],
            ["export", f"o{esc}.plan", "--to", "metis", f"m{esc}.part"],
            ["inspect", f"missing{esc}.plan"]]
    for argv in cmds:
        rc, out, err = run_cli(argv, capsys)
        assert rc == (2 if argv[0] == "inspect" or "--objective" in argv else 0), (argv, err)
        assert "\x1b" not in out + err, (argv, out, err)
        assert "\\x1b[31m" in out + err, (argv, out, err)
    assert {p.name for p in tmp_path.iterdir()} >= {f"o{esc}.plan", f"p{esc}.plan", f"c{esc}.chunks", f"e{esc}"}


def test_printed_lone_surrogates_never_raise(tmp_path, capsys, monkeypatch):
    """A file name that is not UTF-8 (a lone surrogate after decoding) is printed escaped, not a traceback."""
    from partplan.io import write_graph
    g, _ = _plan(tmp_path)
    write_graph(g, tmp_path / "g.mtx")
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(["convert", "g.mtx", "c\udcff.mtx"], capsys)
    assert rc == 0 and "c\\udcff.mtx" in out, (out, err)
    (out + err).encode("utf-8")


# ----------------------------------------------------------------------------- (a) the fork server dies at start
def test_fork_server_dying_at_start_falls_back_to_a_fresh_interpreter(tmp_path, monkeypatch):
    """``EOFError: unexpected EOF`` from multiprocessing's fork server (it died while forking a
    rank) was a traceback of ``partplan plan --nprocs N``; the rank now starts as a fresh interpreter."""
    from partplan.runtime import zygote
    if not hasattr(zygote, "WorkerProcess"):
        pytest.skip("no fork server on this platform")
    started = []

    def dies(self):
        raise EOFError("unexpected EOF")

    class FakePopen:
        def __init__(self, argv, **kw):
            started.append(argv)
    monkeypatch.setattr(zygote, "_zygote_fits", lambda env: True)
    monkeypatch.setattr(zygote.WorkerProcess, "start", dies)
    monkeypatch.setattr(zygote.subprocess, "Popen", FakePopen)
    with open(tmp_path / "rank-0.err", "w+") as err:
        w = zygote.start_worker(["cfg.json"], dict(os.environ), err)
    assert isinstance(w, FakePopen) and started and started[0][1:3] == ["-m", "partplan.runtime.worker"]


def test_quiet_keeps_the_interrupted_line():
    """``-q`` dropped the launcher's ``partplan: interrupted (SIGTERM); ...`` line: exit 143, no line."""
    import io

    from partplan.cli.main import _QuietStderr
    real = io.StringIO()
    q = _QuietStderr(real)
    q.write("partplan: plan-build: starting 2 gloo processes ...\n")
    q.write("partplan: interrupted (SIGTERM); the job's workers were stopped, nothing written\n")
    assert real.getvalue().splitlines() == ["partplan: interrupted (SIGTERM); the job's workers were stopped, "
                                            "nothing written"]


def test_ctrl_c_while_the_commands_load_or_inside_a_compiled_call_is_one_line(monkeypatch, capsys):
    """Ctrl-C while the parser imported the commands (the first second of every run) gave a
    KeyboardInterrupt traceback and death by SIGINT; one inside a numba call returned as a
    SystemError chained to the interrupt: a traceback and exit 1. Both are exit 130 and one line."""
    import partplan.cli.main as climain
    from tests.errlines import run_cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(climain, "build_parser", interrupted)
    rc, out, err = run_cli(["partition", "x.mtx", "-k", "2"], capsys)
    assert rc == 130 and err.strip() == "partplan: interrupted" and "Traceback" not in err, (rc, err)
    monkeypatch.undo()

    def compiled_call(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function _cluster>) returned a result with an exception set")

    real = climain.build_parser
    monkeypatch.setattr(climain, "build_parser", lambda: _with(real(), compiled_call))
    rc, out, err = run_cli(["demo"], capsys)
    assert rc == 130 and err.strip() == "partplan: interrupted", (rc, err)

    def other_system_error(args):
        raise SystemError("not an interrupt")
    monkeypatch.setattr(climain, "build_parser", lambda: _with(real(), other_system_error))
    with pytest.raises(SystemError, match="not an interrupt"):
        run_cli(["demo"], capsys)


@pytest.mark.dist
@pytest.mark.slow
def test_the_entry_module_imports_nothing_heavy_before_the_interrupt_handler():
    """``partplan.cli.main`` is what the console script imports before ``main()`` can catch Ctrl-C:
    numpy, scipy or numba imported there (0.2 s) made an early Ctrl-C a traceback."""
    import subprocess
    import sys
    code = ("import sys, partplan.cli.main; "
            "print(sorted(m for m in ('numpy', 'scipy', 'numba', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def _with(p, func):
    """The parser ``p`` with ``demo`` running ``func``."""
    for a in p._actions:
        if getattr(a, "choices", None) and "demo" in a.choices:
            a.choices["demo"].set_defaults(func=func)
    return p


def test_memory_the_work_cannot_get_is_one_line_not_a_traceback(monkeypatch, capsys):
    """numpy's MemoryError and torch's allocator RuntimeError (a machine, a ulimit or a device short
    of memory) ended in a traceback; they are one line and exit 1. Other RuntimeErrors still raise."""
    import numpy as np

    import partplan.cli.main as climain
    from tests.errlines import run_cli

    real = climain.build_parser

    def numpy_short(args):
        np.empty(1 << 62, dtype=np.uint8)

    def torch_short(args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 1024000000 bytes.")

    for fn in (numpy_short, torch_short):
        monkeypatch.setattr(climain, "build_parser", lambda: _with(real(), fn))
        rc, out, err = run_cli(["demo"], capsys)
        assert rc == 1 and err.count("\n") == 1 and err.startswith("partplan: error: out of memory: "), (rc, err)

    def other(args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(climain, "build_parser", lambda: _with(real(), other))
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli(["demo"], capsys)
