"""The jobs layer: one registry read by the CLI and the workers, a job added by
one module + registration runs end to end, the runtime stays below the jobs
(no partitioner, generators, jobs or CLI imports), and the CLI's kernel /
device flags reach the report."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.cli.main import build_parser, main
from partplan.errors import PartplanError
from partplan.jobs import Job, execute, get, jobs, names, register, unregister
from partplan.plan import build_plan, write_plan

ROOT = Path(__file__).resolve().parents[3]


def _subcommands(parser, *path: str) -> list[str]:
    """The subcommand names under ``partplan <path...>`` as argparse has them."""
    for name in path:
        act = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = act.choices[name]
    act = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(act.choices)


@pytest.fixture()
def plan(tmp_path):
    """A 1d plan of a small directed graph on 3 ranks, with its part vector."""
    rng = np.random.default_rng(5)
    n = 40
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    g = Graph.from_edges(src, dst, n=n, symmetrize=True, self_loops="remove")
    part = rng.integers(0, 3, n)
    part[:3] = [0, 1, 2]
    write_plan(build_plan(g, part, 3), tmp_path / "g.plan")
    return str(tmp_path / "g.plan"), g, part


# ----------------------------------------------------------------------------- one list
def test_the_registry_is_the_one_list_of_jobs():
    want_run = {"spmm", "bfs", "graph500", "pagerank", "wcc", "sssp", "lp", "matching"}
    assert set(names("run")) == want_run
    assert names("train") == ["train-gcn"] and get("train-gcn").subcommand == "gcn"
    assert set(names()) == want_run | {"train-gcn", "topoprobe", "plan-build"}
    parser = build_parser()
    assert sorted(_subcommands(parser, "run")) == sorted(j.subcommand for j in jobs("run"))
    assert _subcommands(parser, "train") == [j.subcommand for j in jobs("train")]
    # the launched worker has no table of its own: it runs the function it is given (the job's run)
    import partplan.runtime.worker as rw
    src = (ROOT / "partplan/runtime/worker.py").read_text()
    assert not any(f'"{n}"' in src for n in names()), "the runtime worker names jobs"
    assert not hasattr(rw, "JOBS")
    with pytest.raises(PartplanError, match="unknown job 'nope'.*bfs"):
        execute("nope", {"backend": "local"})
    for j in jobs():
        assert callable(j.run) and j.output in (None, "npy", "npz")


def test_every_job_runs_through_one_protocol():
    """No job launches itself: each has a module-level run(ctx, cfg) that the launched
    workers import, and at most a prepare(cfg, nprocs, threads) of checks."""
    from dataclasses import fields

    from partplan.runtime.launch import entry_of
    assert "start" not in {f.name for f in fields(Job)}
    for j in jobs():
        mod, fn = entry_of(j.run).split(":")
        assert mod.startswith("partplan.jobs.") and fn, j.name
        assert j.prepare is None or callable(j.prepare)


def test_a_job_name_registers_once():
    with pytest.raises(ValueError, match="twice"):
        register(Job(name="bfs", help="another bfs", run=lambda ctx, cfg: None))
    assert get("bfs").help.startswith("breadth-first")


# ----------------------------------------------------------------------------- adding a job
def _census_arguments(parser) -> None:
    parser.add_argument("plan", metavar="PLAN", help="plan directory")


def run_census(ctx, cfg: dict) -> dict | None:
    """Rows each rank owns, summed over the ranks through the comm (the docs' example job)."""
    from partplan.jobs.common import plan_inputs
    m, shards, comm = plan_inputs(ctx, cfg)
    p = int(m["ranks"])
    vecs = []
    for rp in shards:
        v = np.zeros(p)
        v[rp.rank] = np.asarray(rp.out_ids("forward")).size
        vecs.append(v)
    rows = comm.allreduce_world(vecs, "sum")[0]
    if not ctx.leader:
        return None
    return {"job": cfg["job"], "ranks": p, "backend": ctx.backend, "rows_per_rank": [int(r) for r in rows],
            "rows": int(rows.sum())}


def test_a_toy_job_registered_here_runs_through_the_cli_on_the_local_backend(plan, capsys):
    path, g, part = plan
    job = register(Job(name="census", help="rows per rank", add_arguments=_census_arguments, run=run_census,
                       render=lambda rep: f"rows {rep['rows']} per rank {rep['rows_per_rank']}"))
    try:
        assert "census" in _subcommands(build_parser(), "run")
        assert main(["run", "census", path, "--backend", "local", "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["job"] == "census" and rep["backend"] == "local" and rep["ranks"] == 3
        assert rep["rows"] == g.n
        assert rep["rows_per_rank"] == np.bincount(part, minlength=3).tolist()  # oracle: the partition
        assert main(["run", "census", path, "--backend", "local"]) == 0
        assert capsys.readouterr().out.strip() == f"rows {g.n} per rank {np.bincount(part, minlength=3).tolist()}"
        assert execute(job, {"plan": path, "backend": "local"})["rows"] == g.n  # the Python entry
    finally:
        unregister("census")
    assert "census" not in names()


# ----------------------------------------------------------------------------- layers
RUNTIME_MODULES = sorted(p.stem for p in (ROOT / "partplan/runtime").glob("*.py") if p.stem != "__init__")
FORBIDDEN = ("partplan.partition", "partplan.datasets", "partplan.jobs", "partplan.cli")


def test_importing_the_runtime_loads_no_partitioner_generator_or_job():
    code = "\n".join([
        "import sys, types",
        # skip the package facade (it imports every subpackage), so what is loaded is what the runtime asks for
        "pkg = types.ModuleType('partplan')",
        f"pkg.__path__ = [{str(ROOT / 'partplan')!r}]",
        "sys.modules['partplan'] = pkg",
        "import partplan.plan",  # the plan package first, as the facade loads it (the runtime sits on it)
        *[f"import partplan.runtime.{m}" for m in RUNTIME_MODULES],
        "print('\\n'.join(sorted(sys.modules)))",
    ])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "partplan.runtime.bfs" in loaded and "partplan.runtime.launch" in loaded
    bad = [m for m in loaded if m.startswith(FORBIDDEN)]
    assert not bad, f"the runtime imports {bad}"


def test_no_runtime_module_imports_the_partitioner_generators_or_jobs_even_lazily():
    """Every import statement (module level or inside functions) of partplan/runtime."""
    bad = []
    for path in sorted((ROOT / "partplan/runtime").rglob("*.py")):
        pkg = ["partplan"] + list(path.relative_to(ROOT / "partplan").parent.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - node.level + 1] if node.level else []
                mods = [".".join(base + ([node.module] if node.module else []))]
                mods += [f"{mods[0]}.{a.name}" for a in node.names]  # from .. import partition
            else:
                continue
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {m}" for m in mods if m.startswith(FORBIDDEN)]
    assert not bad, "\n".join(bad)


def test_no_job_imports_the_partitioner_or_the_generators_even_lazily():
    """Every import statement of partplan/jobs: Graph500's set-up lives in the CLI."""
    bad = []
    for path in sorted((ROOT / "partplan/jobs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ["partplan", "jobs"][:3 - node.level] if node.level else []
                mods = [".".join(base + ([node.module] if node.module else []))]
                mods += [f"{mods[0]}.{a.name}" for a in node.names]
            else:
                continue
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {m}" for m in mods
                    if m.startswith(("partplan.partition", "partplan.datasets.generators"))]
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- flags reach the report
def test_kernels_and_device_flags_reach_the_report(plan, capsys):
    path, g, _ = plan
    for kernels in ("native", "torch"):
        assert main(["run", "bfs", path, "--backend", "local", "--roots", "2", "--kernels", kernels, "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["kernels"] == kernels and rep["device"] == "cpu" and rep["all_valid"]
    assert main(["run", "wcc", path, "--backend", "local", "--json"]) == 0  # auto on CPU: native
    rep = json.loads(capsys.readouterr().out)
    assert rep["kernels"] == "native" and rep["device"] == "cpu"
    assert main(["run", "pagerank", path, "--backend", "local", "--kernels", "torch", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"] == "torch"
    assert main(["run", "spmm", path, "--backend", "local", "--kernels", "native", "-f", "3", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["kernels"] == "native" and rep["bytes_match"]
    # gloo's all-to-all takes CPU tensors only: --device cuda with gloo is one clear error, before any start
    assert main(["run", "bfs", path, "--nprocs", "3", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("partplan: error:") and "gloo" in err and "Traceback" not in err


def test_gloo_ranks_run_a_registered_job_through_the_shared_worker_context(plan, capsys):
    path, g, _ = plan
    assert main(["run", "wcc", path, "--nprocs", "3", "--kernels", "native", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["backend"] == "gloo" and rep["kernels"] == "native" and rep["ranks"] == 3 and rep["bytes_match"]
    import scipy.sparse.csgraph as cg
    assert rep["components"] == cg.connected_components(g.to_scipy(), directed=True, connection="weak")[0]


@pytest.mark.parametrize("job", ["spmm", "bfs", "pagerank"])
def test_a_rank_count_not_the_plans_is_refused_on_the_local_backend_too(plan, capsys, job):
    """--nprocs 4 on a 3-rank plan with --backend local is refused, as with gloo (run spmm ran on the
    plan's 3 ranks without a word; the traversal jobs refused it already)."""
    assert main(["run", job, plan[0], "--backend", "local", "--nprocs", "4", "-q"]) == 2
    assert "--nprocs 4 does not match" in capsys.readouterr().err


def test_under_torchrun_a_job_is_one_rank_and_takes_its_threads(tmp_path, monkeypatch, capsys):
    """Under torchrun each process is one rank: `--nprocs` or `--backend local` there ran the whole job
    once per torchrun process (two reports on stdout); both are refused. `--threads` was ignored
    there; it now sets the rank's torch threads."""
    torch = pytest.importorskip("torch")
    from partplan.runtime import launch
    from tests.errlines import one_line, run_cli
    g = Graph.from_edges(np.arange(30) % 10, (np.arange(30) * 3 + 1) % 10, n=10, symmetrize=True)
    path = write_plan(build_plan(g, np.zeros(10, dtype=np.int64), 1), tmp_path / "g.plan")
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PARTPLAN_LAUNCHED", raising=False)
    for extra, needle in ((["--nprocs", "1"], "leave out --nprocs"), (["--backend", "local"], "leave out --backend")):
        rc, out, err = run_cli(["run", "spmm", path, "-q"] + extra, capsys)
        one_line(rc, err, 2, "under torchrun", needle)
        assert out == ""
    before = torch.get_num_threads()
    monkeypatch.setattr(launch, "run_rank", lambda fn, cfg: torch.get_num_threads())
    try:
        assert launch.start({"backend": "gloo"}, None, None, timeout_s=1, threads=2) == 2
    finally:
        torch.set_num_threads(before)


def test_worker_threads_replace_the_shells_omp_num_threads(monkeypatch, tmp_path):
    """``--threads T`` (or its default 1) is what the started workers run with, even where the
    caller's shell exports another OMP_NUM_THREADS; ``env`` still goes over everything."""
    from partplan.runtime.launch import worker_env
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("MASTER_PORT", "29500")
    e = worker_env(3, tmp_path, 2)
    assert e["OMP_NUM_THREADS"] == "2" and e["WORLD_SIZE"] == "3" and "MASTER_PORT" not in e
    assert worker_env(3, tmp_path, None)["OMP_NUM_THREADS"] == "7"
    assert worker_env(3, tmp_path, 2, {"OMP_NUM_THREADS": "4"})["OMP_NUM_THREADS"] == "4"


@pytest.mark.parametrize("argv,said", [
    (["run", "bfs", "x.plan", "--alpha", "0"], "--alpha: expected a finite number > 0, got 0"),
    (["run", "bfs", "x.plan", "--beta", "-1"], "--beta: expected a finite number > 0, got -1"),
    (["run", "pagerank", "x.plan", "--damping", "-0.1"], "--damping: expected a number in [0, 1], got -0.1"),
    (["run", "pagerank", "x.plan", "--damping", "1.5"], "--damping: expected a number in [0, 1], got 1.5"),
])
def test_a_range_option_says_its_whole_range_at_once(argv, said, capsys):
    """One message per option naming the range the job accepts (before: ">= 0" for a value the job
    then refused as 0, and a damping above 1 refused by another check in other words)."""
    from tests.errlines import run_cli
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1
