"""Test tiers, shared fixtures and a launch audit for the whole suite.

Tiers (the Makefile's targets)::

    make check   pytest -m "not slow"   unit tests, LocalComm oracles, one small launch per job family
    make test    pytest                 everything (what CI runs), after fetching the real datasets

Markers (registered in pyproject.toml)::

    dist   the test starts Python processes: gloo workers, torchrun, mp.spawn, the CLI or an
           interpreter in a subprocess (see the launch audit below)
    slow   the extra that ``make check`` leaves out: further launches, real or large graphs,
           network downloads, long trainings
    data   needs a dataset fetched into the cache (skipped when absent)

A test file may carry its markers itself (decorators, ``pytestmark``); :data:`MARKS` assigns
them by file and test name for files whose authors have not done so yet (an entry can move into
its file and leave this table at any time; an entry that matches nothing is reported).

``make check`` keeps one small launch per job family (``dist`` without ``slow``): spmm,
train gcn, bfs, pagerank/wcc/sssp, steal, topology probe, distributed plan build; every other
launch is ``slow``.

Launch audit: every test records how many Python processes it started; the terminal summary
lists those that started one without the ``dist`` marker (and ``dist`` tests that started
none), so the tiers stay true as tests change. It works under pytest-xdist too.
"""
from __future__ import annotations

import fnmatch
import json
import multiprocessing.process as _mpp
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# OpenMP threads that wait for work sleep instead of spinning: pytest-xdist workers and the
# processes the tests launch share the cores, and spinning threads burn what the others need
# (about 13% of the CPU time of the torch-heavy files on 2 cores). Results do not depend on it.
# Set before torch loads OpenMP here, and inherited by every process a test starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# ----------------------------------------------------------------------------- markers by file
#: file name -> marker -> fnmatch patterns over the test's name (with its [parameters]).
#: Keyed by the file's name alone, so it survives moving the file into a subfolder.
MARKS: dict[str, dict[str, tuple[str, ...]]] = {
    "test_runtime.py": {
        "dist": ("test_gloo_*", "test_dead_peer_*", "test_count_mismatch_*", "test_torchrun_*", "test_nccl_*",
                 "test_torch_csr_kernel_equals_scipy[[]AVX2]", "test_torch_csr_kernel_equals_scipy[[]SSE4_2]"),
        "slow": ("test_gloo_p2_every_layout_writes_scipys_Z[[]1.5d*", "test_gloo_p2_every_layout_writes_scipys_Z[[]2d*",
                 "test_gloo_p4_*", "test_dead_peer_*", "test_count_mismatch_*", "test_torchrun_*", "test_nccl_*",
                 "test_torch_csr_kernel_equals_scipy[[]AVX2]", "test_torch_csr_kernel_equals_scipy[[]SSE4_2]"),
    },
    "test_distbuild.py": {
        "dist": ("test_golden_graphs_byte_identical*", "test_directed_several_parts_per_process_backward",
                 "test_email_enron_byte_identical*", "test_rmat12_chunked_generator_byte_identical*",
                 "test_rmat16_byte_identical_p4", "test_bad_partition_stops_every_rank",
                 "test_cli_chunked_convert_generate_and_plan_nprocs", "test_dead_process_ends_the_build_with_one_error",
                 "test_split_layouts_byte_identical_on_gloo*"),
        "slow": ("test_golden_graphs_byte_identical*", "test_split_layouts_byte_identical_on_gloo*", "test_email_enron_byte_identical*",
                 "test_rmat12_chunked_generator_byte_identical*", "test_rmat16_byte_identical_p4",
                 "test_bad_partition_stops_every_rank", "test_cli_chunked_convert_generate_and_plan_nprocs",
                 "test_dead_process_ends_the_build_with_one_error"),
    },
    "test_jobs.py": {
        "dist": ("test_importing_the_runtime_loads_no_partitioner_generator_or_job",
                 "test_gloo_ranks_run_a_registered_job_through_the_shared_worker_context"),
        "slow": ("test_importing_the_runtime_loads_no_partitioner_generator_or_job",
                 "test_gloo_ranks_run_a_registered_job_through_the_shared_worker_context"),
    },
    "test_trust_launch.py": {
        "dist": ("test_signal_stops_workers_writes_nothing*", "test_sigkill_of_launcher_takes_workers_down",
                 "test_worker_exits_when_launcher_already_gone", "test_concurrent_writers_each_end_in_a_correct_file",
                 "test_planted_symlinks_at_temp_names_redirect_nothing", "test_full_disk_is_one_error_before_work_faked*",
                 "test_full_tmpfs_is_one_error", "test_secret_mismatch_is_one_error_on_every_rank",
                 "test_sigterm_outside_a_launch_is_one_line_and_no_output*"),
        "slow": ("test_signal_stops_workers_writes_nothing*", "test_sigkill_of_launcher_takes_workers_down",
                 "test_worker_exits_when_launcher_already_gone", "test_concurrent_writers_each_end_in_a_correct_file",
                 "test_planted_symlinks_at_temp_names_redirect_nothing", "test_full_disk_is_one_error_before_work_faked*",
                 "test_full_tmpfs_is_one_error", "test_secret_mismatch_is_one_error_on_every_rank",
                 "test_sigterm_outside_a_launch_is_one_line_and_no_output*"),
    },
    "test_dist_spmm.py": {
        "dist": ("test_dist_spmm_gloo_directed",
                 "test_dist_spmm_p4_equals_gcnconv_on_a_directed_graph"),
        "slow": ("test_dist_spmm_p4_equals_gcnconv_on_a_directed_graph",),   # the p = 2 one stays in make check
    },
    "test_lanes.py": {
        "dist": ("test_mtkahypar_deterministic_start_is_the_same_at_any_thread_count",),
        "slow": ("test_mtkahypar_deterministic_start_is_the_same_at_any_thread_count",),
    },
    "test_refine.py": {
        "dist": ("test_kernel_loading_does_not_count_against_the_time_limit",),
        "slow": ("test_kernel_loading_does_not_count_against_the_time_limit",),
    },
    "test_partition.py": {   # kahypar runs in a child process
        "dist": ("test_kahypar_connectivity_equals_our_volume", "test_kahypar_bad_ini_is_a_clear_error"),
        "slow": ("test_kahypar_bad_ini_is_a_clear_error",),
    },
    "test_partition_auto.py": {
        "dist": ("test_any_integer_seed_reaches_the_engines[[]kw2]",),
        "slow": ("test_any_integer_seed_reaches_the_engines[[]kw2]",),
    },
    "test_methods.py": {"slow": ("test_metis_and_hypergraph_are_the_engines",)},
    "test_rebalance.py": {"slow": ("test_default_pipeline_keeps_compute_within_eps_on_directed_graphs_with_empty_rows*",)},
    "test_docs.py": {"dist": ("test_readme_cli_block*",), "slow": ("test_readme_cli_block*",)},
    "test_steal.py": {
        "dist": ("test_gloo_p2_bfs_and_sssp_with_stealing_through_the_cli", "test_every_process_computes_the_same_assignment"),
        "slow": ("test_every_process_computes_the_same_assignment",),
    },
}

#: the launch each job family keeps in ``make check`` (``dist`` without ``slow``)
CHECK_LAUNCHES: dict[str, str] = {
    "spmm": "test_runtime.py::test_gloo_p2_every_layout_writes_scipys_Z[1d-2-True]",
    "train gcn": "test_gcn.py::test_gloo_p2_float64_equals_p1",
    "bfs": "test_bfs.py::test_gloo_p2_directed_plan_parents_equal_local",
    "pagerank/wcc/sssp": "test_graph_analytics.py::test_gloo_p2_pagerank_and_local_wcc_sssp_through_the_cli",
    "steal": "test_steal.py::test_gloo_p2_bfs_and_sssp_with_stealing_through_the_cli",
    "probe": "test_topology.py::test_probe_two_gloo_processes_writes_a_matrix_topology",
    "distributed plan build": "test_distbuild.py::test_directed_several_parts_per_process_backward",
    "kahypar engine (a child process)": "test_partition.py::test_kahypar_connectivity_equals_our_volume",
    "import contract (lint-imports, once)": "test_layers.py::test_import_contract",
}


def _marks_for(item) -> list[str]:
    table = MARKS.get(Path(str(item.fspath)).name)
    if not table:
        return []
    name = item.name
    return [m for m, pats in table.items() if any(fnmatch.fnmatchcase(name, p) for p in pats)]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers added here
def pytest_collection_modifyitems(session, config, items):
    used: set[tuple[str, str, str]] = set()
    files = set()
    for item in items:
        fname = Path(str(item.fspath)).name
        files.add(fname)
        for marker, pats in MARKS.get(fname, {}).items():
            for p in pats:
                if fnmatch.fnmatchcase(item.name, p):
                    used.add((fname, marker, p))
                    if item.get_closest_marker(marker) is None:
                        item.add_marker(getattr(pytest.mark, marker))
    if _xdist(config):
        _heaviest_files_first(items)
    if any("::" in str(a) for a in config.args):  # single tests named: the rest is not collected
        return
    stale = [f"{f}: {m} {p!r}" for f, table in MARKS.items() if f in files
             for m, pats in table.items() for p in pats if (f, m, p) not in used]
    if stale:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning("tests/conftest.py MARKS entries that match no test (renamed?): "
                                       + "; ".join(stale)), stacklevel=2)


def _xdist(config) -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) or getattr(config.option, "numprocesses", None) not in (None, 0)


#: rough seconds of one test, by marker: what orders the files for pytest-xdist (see below)
_COST = {"dist": 8.0, "slow": 6.0}


def _heaviest_files_first(items) -> None:
    """Under pytest-xdist with ``--dist loadfile`` (the Makefile's) each file is one unit of work,
    handed out in collection order (with ``--no-loadscope-reorder``; by default xdist orders by
    test count, and the files with the most tests are the quickest here). Heaviest first, by a
    marker estimate, so that no long file starts last; the order inside a file is kept."""
    cost: dict[str, float] = {}
    for it in items:
        f = str(it.fspath)
        cost[f] = cost.get(f, 0.0) + max([_COST[m] for m in _COST if it.get_closest_marker(m)] or [0.1])
    order = {f: i for i, f in enumerate(sorted(cost, key=lambda f: -cost[f]))}
    items.sort(key=lambda it: order[str(it.fspath)])  # stable: a file's own order stays


# ----------------------------------------------------------------------------- launch audit
_current: dict = {"n": 0}
_PY_TOOLS = ("python", "partplan", "torchrun", "lint-imports")
_SHELLS = ("bash", "sh")  # a shell that runs the console scripts


def _is_python_launch(argv) -> bool:
    """A process that starts a Python interpreter with site packages (what costs seconds);
    the partitioner's heartbeat child (``python -I -S``) and tools like dpkg-deb are not counted."""
    if not argv:
        return False
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
    exe = os.path.basename(argv[0])
    if exe in ("mpirun", "mpiexec", "orterun") and sys.executable in argv:   # MPI ranks running Python
        return True
    if not (exe.startswith(_PY_TOOLS) or exe in _SHELLS) and argv[0] != sys.executable:
        return False
    return "-S" not in argv[1:3] and not {"-I", "-S"} <= set(argv[1:4])


def _audit_hook(event, args):
    if event == "subprocess.Popen":
        try:
            if _is_python_launch(args[1] if args[1] is not None else args[0]):
                _current["n"] += 1
        except Exception:  # noqa: BLE001 - an audit hook must never raise
            pass


sys.addaudithook(_audit_hook)
_orig_start = _mpp.BaseProcess.start


def _mp_start(self):  # multiprocessing's spawn start method is not an audit event
    _current["n"] += 1
    return _orig_start(self)


_mpp.BaseProcess.start = _mp_start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current["n"] = 0
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown":
        rep = outcome.get_result()
        rep.user_properties.append(("launches", _current["n"]))
        rep.user_properties.append(("dist", item.get_closest_marker("dist") is not None))  # not keywords:
        # they hold the folder names too, and tests/dist is one


_audit: dict[str, list] = {"passed": [], "rows": []}


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _audit["passed"].append(report.nodeid)
    if report.when == "teardown":
        props = dict(report.user_properties)
        _audit["rows"].append((report.nodeid, props.get("launches", 0), props.get("dist", False)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    passed = set(_audit["passed"])
    unmarked = [(nid, n) for nid, n, dist in _audit["rows"] if n and not dist]
    launched = {nid.split("[")[0] for nid, n, _ in _audit["rows"] if n}   # a session fixture launches once
    idle = [nid for nid, n, dist in _audit["rows"] if dist and not n and nid in passed
            and nid.split("[")[0] not in launched]
    if not (unmarked or idle):
        return
    tr = terminalreporter
    tr.section("launch audit")
    if unmarked:
        tr.write_line("started Python processes without the `dist` marker (add it, and `slow` unless it is "
                      "its family's one launch in `make check`; see tests/conftest.py):")
        for nid, n in unmarked:
            tr.write_line(f"  {nid}  ({n} process{'es' if n > 1 else ''})")
    if idle:
        tr.write_line("marked `dist` but started no Python process:")
        for nid in idle:
            tr.write_line(f"  {nid}")


# PyG writes the module of each MessagePassing class it specialises (its propagate, its
# edge_updater) to a temporary file it never removes (torch_geometric.template.module_from_template,
# delete=False): one per class and process, about 20 per run of this suite. The controlling process
# removes those this user wrote during the session, once every worker has ended, and the log
# folders torchrun makes for each launch (torchelastic_*, also never removed).
_SESSION_START = time.time()
_LEFTOVERS = (   # (name pattern in the temporary folder, the kind of entry, how it is removed)
    ("*_propagate_????????.py", stat.S_ISREG, os.unlink),
    ("*_edge_updater_????????.py", stat.S_ISREG, os.unlink),
    ("torchelastic_*", stat.S_ISDIR, lambda d: shutil.rmtree(d, ignore_errors=True)),
)


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):       # an xdist worker: the controller cleans up
        return
    tmp = Path(tempfile.gettempdir())
    for pattern, is_kind, remove in _LEFTOVERS:
        for entry in tmp.glob(pattern):
            try:
                st = entry.lstat()
                if is_kind(st.st_mode) and st.st_uid == os.getuid() and st.st_mtime >= _SESSION_START:
                    remove(entry)
            except OSError:
                pass


# ----------------------------------------------------------------------------- shared fixtures
@pytest.fixture(scope="session")
def enron():
    """The embedded email-Enron graph (36,692 vertices), loaded once per session. Read-only:
    copy it before changing anything."""
    from partplan import datasets
    return datasets.load("email-Enron")


@pytest.fixture(scope="session")
def polblogs_sym():
    """The embedded polblogs graph, symmetrized (what the GCN tests train on), once per session."""
    from partplan import datasets
    return datasets.load_graph("polblogs").normalize(symmetrize=True)


_CLI_BATCH = r"""
import contextlib, io, json, sys
from partplan.cli.main import main
for argv in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    sys.__stdout__.write(json.dumps([rc, out.getvalue(), err.getvalue()]) + "\n")
    sys.__stdout__.flush()
"""


@pytest.fixture
def cli_batch():
    """``run(argvs, env=None)``: the CLI's ``main(argv)`` for each command line, in order, in ONE
    fresh interpreter (a crash or a traceback cannot take pytest down, and one start-up serves
    them all); returns ``[(exit status, stdout, stderr), ...]``. An interpreter that dies (signal,
    uncaught exception) fails the test naming the command line it was running."""
    def run(argvs, env=None, timeout=300):
        argvs = [[str(a) for a in argv] for argv in argvs]
        r = subprocess.run([sys.executable, "-c", _CLI_BATCH], input=json.dumps(argvs), capture_output=True,
                           text=True, timeout=timeout, env={**os.environ, **(env or {})})
        done = [tuple(json.loads(ln)) for ln in r.stdout.splitlines() if ln.startswith("[")]
        if len(done) < len(argvs):
            pytest.fail(f"the CLI process ended (status {r.returncode}) while running "
                        f"{' '.join(argvs[len(done)])}:\n{r.stderr[-3000:]}", pytrace=False)
        return done
    return run
