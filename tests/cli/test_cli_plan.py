"""CLI: partplan validate / inspect / export (in-process through cli.main, plus
one subprocess run of the installed console script)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from partplan import Graph
from partplan.cli.main import main
from partplan.plan import build_plan, write_plan


@pytest.fixture
def plan_path(tmp_path):
    rng = np.random.default_rng(0)
    n = 100
    g = Graph.from_edges(rng.integers(0, n, 500), rng.integers(0, n, 500), n=n, symmetrize=True, name="cli")
    from partplan.io import write_graph
    gpath = tmp_path / "g.mtx"
    write_graph(g, gpath)
    return write_plan(build_plan(g, rng.integers(0, 3, n), 3), tmp_path / "g.plan"), gpath


@pytest.mark.parametrize("cmd", ["validate", "inspect", "export"])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert "PLAN" in capsys.readouterr().out


def test_validate_ok_and_json(plan_path, capsys):
    path, gpath = plan_path
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "replay" in out
    assert main(["validate", str(path), "--graph", str(gpath), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["graph_checked"]


def test_validate_corrupted_is_one_line_exit_2(plan_path, capsys):
    path, _ = plan_path
    f = path / "rank-00001.arrow"
    b = bytearray(f.read_bytes())
    b[100] ^= 0xFF
    f.write_bytes(bytes(b))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partplan: error:") and "rank-00001.arrow" in err[0]


def test_validate_deleted_shard_and_other_graph(plan_path, tmp_path, capsys):
    path, _ = plan_path
    other = tmp_path / "other.mtx"
    from partplan.io import write_graph
    write_graph(Graph.from_edges([0, 1], [1, 2], n=100), other)
    assert main(["validate", str(path), "--graph", str(other)]) == 2
    assert "another graph" in capsys.readouterr().err
    os.remove(path / "rank-00002.arrow")
    assert main(["validate", str(path)]) == 2
    assert "rank-00002.arrow: shard of rank 2 is missing" in capsys.readouterr().err


def test_inspect(plan_path, capsys):
    path, _ = plan_path
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "layout      1d" in out and "send_rows" in out
    assert main(["inspect", str(path), "--json", "--rank", "1"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["ranks"] == 3 and m["shard"]["rank"] == 1 and "fwd.1.idx" in m["shard"]["fields"]


def test_inspect_names_how_the_partition_was_made(tmp_path, capsys):
    """The text named model, backend, objective and seed only; the engine, ε and preset the
    manifest records (--json's params) are named too."""
    rng = np.random.default_rng(1)
    g = Graph.from_edges(rng.integers(0, 80, 300), rng.integers(0, 80, 300), n=80, symmetrize=True, name="m")
    from partplan.io import write_graph
    write_graph(g, tmp_path / "g.npz")
    assert main(["-q", "partition", str(tmp_path / "g.npz"), "-k", "4", "--imbalance", "0.05", "--engine",
                 "metis", "--objective", "max-both", "-o", str(tmp_path / "g.plan")]) == 0
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "g.plan")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("partition "))
    assert "backend=metis" in line and "imbalance=0.05" in line and "seed=0" in line


def test_export_all_targets(plan_path, tmp_path, capsys):
    path, _ = plan_path
    from partplan.io.foreign import read_partition_any
    from partplan.plan import load_plan
    part = load_plan(path).part
    for to, out in (("metis", tmp_path / "g.part.3"), ("dgl", tmp_path / "dgl"), ("pyg", tmp_path / "pyg")):
        assert main(["export", str(path), "--to", to, str(out), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["to"] == to and info["files"]
        assert np.array_equal(read_partition_any(out, part.size), part)


@pytest.mark.dist
@pytest.mark.slow
def test_console_script_subprocess(plan_path):
    path, _ = plan_path
    exe = os.path.join(os.path.dirname(sys.executable), "partplan")
    r = subprocess.run([exe, "validate", str(path), "--no-replay"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "valid" in r.stdout


def test_options_that_act_only_elsewhere_are_refused(tmp_path, capsys):
    """`plan --timeout` without --nprocs (it times the distributed build's peers) and a topology
    written over an existing file that is no topology (a graph was replaced by `topology probe -o
    g.mtx`); a new file of any name, or a topology file, is written."""
    from tests.errlines import one_line, run_cli
    np.save(tmp_path / "p.npy", np.arange(1490) % 2)
    rc, _, err = run_cli(["plan", "polblogs", "--partition", tmp_path / "p.npy", "--timeout", "5",
                          "-o", tmp_path / "t.plan"], capsys)
    one_line(rc, err, 2, "--timeout")
    assert not (tmp_path / "t.plan").exists()
    g = tmp_path / "g.mtx"
    g.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    for argv in (["topology", "show", "tree:2x2", "-o", g], ["topology", "probe", "--nprocs", "2", "-o", g]):
        rc, _, err = run_cli(argv, capsys)
        one_line(rc, err, 2, "not a topology JSON")
    assert g.read_text().startswith("%%MatrixMarket")
    t = tmp_path / "t.topo"          # any new name, and a topology it replaces
    for spec in ("tree:2x2", "tree:4x2"):
        assert run_cli(["-q", "topology", "show", spec, "-o", t], capsys)[0] == 0
    from partplan.topology import load_topology
    assert load_topology(str(t)).ranks == 8


def test_partition_with_a_route_reports_the_routes_figures_as_its_plan_records(tmp_path, capsys):
    """`partition --topology T --route domain -o X.plan`: the printed and --json figures of the routed
    layout (forwarded rows counted at every hop) are the ones the written plan's manifest records,
    beside the direct 1D exchange's."""
    import json

    from tests.errlines import run_cli
    out = tmp_path / "e.plan"
    rc, text, err = run_cli(["partition", "polblogs", "-k", 8, "--topology", "tree:2x4", "--route", "domain",
                             "-q", "--json", "-o", out], capsys)
    assert rc == 0, err
    d = json.loads(text)
    recorded = json.loads((out / "manifest.json").read_text())["stats"]
    assert d["layout_stats"]["total_volume"] == recorded["total_volume"]
    assert d["layout_stats"]["max_send"] == recorded["max_send"]
    rc, text, err = run_cli(["partition", "polblogs", "-k", 8, "--topology", "tree:2x4", "--route", "domain",
                             "-q", "-o", tmp_path / "f.plan"], capsys)
    assert rc == 0, err
    assert f"total_volume  {recorded['total_volume']:,} rows (summed over the route's steps" in text \
        or f"{recorded['total_volume']:,} rows (summed over the route's steps" in text


def test_inspect_prints_layout_parameters_as_options_not_a_python_dict(tmp_path, capsys):
    import numpy as np

    from partplan import Graph
    from partplan.io import write_graph
    from tests.errlines import run_cli
    i = np.arange(40)
    write_graph(Graph.from_edges(i, (i + 1) % 40, n=40, symmetrize=True), tmp_path / "g.mtx")
    np.save(tmp_path / "p.npy", np.arange(40) % 4)
    rc, _, err = run_cli(["plan", tmp_path / "g.mtx", "--partition", tmp_path / "p.npy", "--layout", "routed:domain:2",
                          "-q", "-o", tmp_path / "r.plan"], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["inspect", tmp_path / "r.plan"], capsys)
    line = next(ln for ln in out.splitlines() if ln.startswith("layout"))
    assert "domain_size=2 route=domain" in line and "{" not in line, line


def test_skipped_part_ids_warn_only_where_the_rank_count_is_not_named(tmp_path, capsys):
    """A bare partition whose ids skip values warns that those ranks would be empty and advises
    naming the count with -k; with -k given the warning still came (the ranks asked for)."""
    part = np.zeros(1490, dtype=np.int64)
    part[700:] = 2                                             # id 1 skipped
    np.save(tmp_path / "p.npy", part)
    base = ["plan", "polblogs", "--partition", str(tmp_path / "p.npy"), "-q"]
    assert main(base + ["-o", str(tmp_path / "a.plan")]) == 0
    assert "ids skip 1" in capsys.readouterr().err
    assert main(base + ["-k", "4", "--layout", "2d:2x2", "-o", str(tmp_path / "b.plan")]) == 0
    assert "skip" not in capsys.readouterr().err


def test_outputs_inside_an_input_folder_or_named_as_a_folder_are_refused(tmp_path, capsys):
    """`plan DIR --partition P -o DIR/sub.plan` wrote a plan inside the chunked graph it read
    (partition refused the same); `partition -o x.npy/` wrote x.npy (the slash dropped)."""
    from tests.errlines import run_cli
    assert main(["-q", "convert", "polblogs", str(tmp_path / "g"), "--chunks", "2"]) == 0
    part = tmp_path / "p.npy"
    np.save(part, np.arange(1490) % 2)
    rc, _, err = run_cli(["plan", tmp_path / "g", "--partition", part, "-o", tmp_path / "g" / "sub.plan"], capsys)
    assert rc == 2 and "is inside the input" in err and not (tmp_path / "g" / "sub.plan").exists()
    rc, _, err = run_cli(["partition", "polblogs", "-k", "2", "-o", f"{tmp_path / 'x.npy'}/"], capsys)
    assert rc == 2 and "names a directory" in err and not (tmp_path / "x.npy").exists()
    # convert wrote a folder or a file inside the chunked graph it read; the graph itself may be rewritten
    before = sorted(p.name for p in (tmp_path / "g").iterdir())
    for out, extra in (("sub", ["--chunks", "3"]), ("g.mtx", [])):
        rc, _, err = run_cli(["convert", tmp_path / "g", tmp_path / "g" / out, *extra], capsys)
        assert rc == 2 and "is inside the input" in err, err
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == before
    rc, _, err = run_cli(["convert", tmp_path / "g", tmp_path / "g", "--chunks", "3"], capsys)
    from partplan.datasets import load_graph
    from partplan.io import read_graph
    assert rc == 0 and (tmp_path / "g" / "chunk-00002.indptr.npy").exists()
    assert read_graph(tmp_path / "g").fingerprint == load_graph("polblogs").fingerprint
