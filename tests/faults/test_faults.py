"""Hostile input and faults, one case per class, through the CLI: each asserts
the exit status, the one ``partplan: error:`` line (naming the file or the
option), the files left behind and, for the cases that start processes, that
nothing of the job is alive 5 s later.

Classes: a FIFO in a plan (inspect / validate never block); a shard whose
array claims more entries than its buffer holds and a shard with compressed
buffers (validate / inspect / run: one error, never a crash); budgets refused
before any work (--threads beyond the cores, -f, --classes, partition -f 2^40
never writes a plan); non-finite values computed by a job (one error, no
output); a gzip partition bomb under ``RLIMIT_AS`` (refused with the memory
of a small file); a peer killed in the distributed plan build (one line
within --timeout, no plan, no temporaries, no worker left).
"""
from __future__ import annotations

import gzip
import os
import resource
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from partplan.cli.main import main

from partplan import Graph
from partplan.io import write_graph
from partplan.plan import build_plan, write_plan
from proctools import gone_within, live_pids, resign_shard

PARTPLAN = [sys.executable, "-m", "partplan"]
N = 64


def _graph() -> Graph:
    rng = np.random.default_rng(1)
    return Graph.from_edges(rng.integers(0, N, 300), rng.integers(0, N, 300), n=N, symmetrize=True, name="r")


@pytest.fixture(scope="module")
def plan_src(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    g = _graph()
    write_graph(g, d / "g.mtx")
    return g, write_plan(build_plan(g, np.arange(N) % 2, 2), d / "g.plan"), d / "g.mtx"


@pytest.fixture
def plan(plan_src, tmp_path):
    import shutil
    g, src, mtx = plan_src
    return g, Path(shutil.copytree(src, tmp_path / "g.plan")), mtx


def one_line(rc, err, code=2, *needles):
    assert rc == code, (rc, err)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("partplan: error:") or "error: argument" in ln]
    assert len(lines) == 1, err
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def run_cli(argv, capsys):
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:   # argparse's own refusals
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _lying_shard(f: Path) -> bytes:
    """The shard with its first values array's entry count (a FieldNode in the header) set to 2^40."""
    import pyarrow as pa
    from pyarrow import ipc
    with pa.memory_map(str(f)) as src:
        count = len(ipc.open_file(src).get_batch(0).column(0).values)
    data = bytearray(f.read_bytes())
    at = bytes(data).find(struct.pack("<qq", count, 0))
    assert at > 0
    data[at:at + 16] = struct.pack("<qq", 1 << 40, 0)
    return bytes(data)


def _compressed_shard(f: Path) -> bytes:
    import io

    import pyarrow as pa
    from pyarrow import ipc
    with pa.memory_map(str(f)) as src:
        r = ipc.open_file(src)
        sink = io.BytesIO()
        with ipc.new_file(sink, r.schema, options=ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_batch(r.get_batch(0))
    return sink.getvalue()


# ----------------------------------------------------------------------------- in this process
def test_fifo_in_a_plan_never_blocks_inspect_or_validate(plan, capsys):
    _, path, _ = plan
    (path / "rank-00001.arrow").unlink()
    os.mkfifo(path / "rank-00001.arrow")
    before = listing(path)
    signal.alarm(60)    # a hang fails the test instead of the suite
    try:
        for cmd in (["inspect", path, "--rank", 1], ["validate", path]):
            rc, _, err = run_cli(cmd, capsys)
            one_line(rc, err, 2, "rank-00001.arrow", "FIFO")
    finally:
        signal.alarm(0)
    assert listing(path) == before


def test_budgets_refused_before_any_work(plan, tmp_path, capsys):
    _, path, mtx = plan
    cases = [(["run", "spmm", path, "--nprocs", 2, "--threads", 100000], "--threads: 100000 threads"),
             (["run", "spmm", path, "--nprocs", 2, "-f", 1 << 32], "-f: features of width f = 4294967296"),
             (["train", "gcn", path, "--nprocs", 2, "--random-features", 8, "--classes", 10 ** 8],
              "--classes: --classes 100000000")]
    for argv, needle in cases:
        t0 = time.monotonic()
        rc, _, err = run_cli(argv, capsys)
        one_line(rc, err, 2, needle)
        assert time.monotonic() - t0 < 10
    rc, _, err = run_cli(["partition", mtx, "-k", 2, "-f", 1 << 40, "-o", tmp_path / "x.plan"], capsys)
    one_line(rc, err, 2, "-f: a feature width of 1099511627776", "2^24")
    assert not (tmp_path / "x.plan").exists()
    for argv, needle in ((["analyze", mtx, "-k", 2, "--partition", tmp_path / "p.npy", "--topology", "tree:100x100"],
                          "10000 ranks, but -k is 2"),
                         (["datasets", "generate", "rmat", "--scale", 36, "-o", tmp_path / "r.mtx"], "--scale"),
                         (["datasets", "generate", "grid2d", "--nx", 10 ** 6, "--ny", 10 ** 6, "-o",
                           tmp_path / "g.mtx"], "--nx / --ny")):
        np.save(tmp_path / "p.npy", np.arange(N) % 2)
        t0 = time.monotonic()
        rc, _, err = run_cli(argv, capsys)
        one_line(rc, err, 2, needle)
        assert time.monotonic() - t0 < 10
    assert sorted(listing(tmp_path)) == ["g.plan", "p.npy"]


def test_full_disk_while_writing_a_plan_keeps_the_old_one(plan, monkeypatch):
    import errno

    from partplan.errors import OutputPathError
    from partplan.plan import read_manifest, store
    g, path, _ = plan
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(store, "_write_arrow", full)
    with pytest.raises(OutputPathError, match="not enough space"):
        write_plan(build_plan(g, np.arange(N) % 3, 3), path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before and read_manifest(path)["k"] == 2
    assert listing(path.parent) == ["g.plan"]


def test_bidi_override_breaks_the_plain_name_rule():
    from partplan.io.trust import plain_name, plain_name_problem
    assert plain_name_problem("ab\u202ecd") and plain_name("ab\u202ecd") == "ab_cd"
    assert plain_name_problem("graph-1") is None


def test_chunked_header_with_deep_nesting_is_one_error(tmp_path):
    from partplan.errors import GraphFormatError
    from partplan.io.chunked import chunk_info, write_chunked
    out = write_chunked(_graph(), tmp_path / "g.chunks", chunks=2)
    (out / "header.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(GraphFormatError, match="nested"):
        chunk_info(out)
    (out / "header.json").write_text('{"n": ' + "9" * 5000 + "}")
    with pytest.raises(GraphFormatError, match="digits"):
        chunk_info(out)


def test_non_finite_output_is_one_error_and_no_file(plan, tmp_path, capsys):
    _, path, _ = plan
    np.save(tmp_path / "H.npy", np.full((N, 2), 3e38, dtype=np.float32))   # finite; their sums are not
    rc, _, err = run_cli(["run", "spmm", path, "--backend", "local", "--feature-file", tmp_path / "H.npy",
                          "--output", tmp_path / "Z.npy", "--repeat", 1, "--warmup", 0], capsys)
    one_line(rc, err, 2, "non-finite", "overflow", "float32", "step")   # the step and the cause, one line
    assert listing(tmp_path) == ["H.npy", "g.plan"]                       # and no output written
    np.save(tmp_path / "H.npy", np.ones((N, 2), dtype=np.float32))
    rc, _, err = run_cli(["run", "spmm", path, "--backend", "local", "--feature-file", tmp_path / "H.npy",
                          "--output", tmp_path / "Z.npy", "--repeat", 1, "--warmup", 0], capsys)
    assert rc == 0, err
    A = _graph().to_scipy()
    assert np.allclose(np.load(tmp_path / "Z.npy"), A @ np.ones((N, 2)), rtol=1e-6)


# ----------------------------------------------------------------------------- in a subprocess
@pytest.mark.dist
def test_resigned_shards_are_one_error_never_a_crash(plan, tmp_path, cli_batch):
    """A crash would end the interpreter: cli_batch then fails naming the command."""
    _, path, _ = plan
    lie, comp = tmp_path / "lie.plan", tmp_path / "comp.plan"
    import shutil
    shutil.copytree(path, lie)
    shutil.copytree(path, comp)
    resign_shard(lie, 0, _lying_shard(lie / "rank-00000.arrow"))
    resign_shard(comp, 0, _compressed_shard(comp / "rank-00000.arrow"))
    res = cli_batch([["validate", lie], ["inspect", lie, "--rank", 0],
                     ["run", "spmm", lie, "--backend", "local", "--repeat", 1, "--warmup", 0],
                     ["validate", comp]], timeout=180)
    for rc, _, err in res[:3]:
        one_line(rc, err, 2, "rank-00000.arrow")
    one_line(*res[3][::2], 2, "rank-00000.arrow", "compressed")


def _bomb(path: Path, text_bytes: int) -> int:
    """A multi-member gzip partition file: one member of 16 MiB of text, repeated."""
    member = gzip.compress(b"0\n" * (8 << 20), compresslevel=9)
    path.write_bytes(member * (text_bytes // (16 << 20)))
    return path.stat().st_size


@pytest.mark.dist
@pytest.mark.slow
def test_gzip_partition_bomb_under_rlimit_as(plan, tmp_path):
    """4 GiB of text in a small file: refused under a 3 GiB address-space limit, with the
    peak memory of a small file (at most 2 × its size + 200 MB above the interpreter's)."""
    _, _, mtx = plan
    size = _bomb(tmp_path / "p.part.gz", 4 << 30)
    limit = 3 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    code = ("import resource, sys\nfrom partplan.cli.main import main\n"
            "rc = main(sys.argv[1:])\n"
            "print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)\n"
            "sys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, "plan", mtx, "--partition", tmp_path / "p.part.gz",
                        "-o", tmp_path / "x.plan"], capture_output=True, text=True, timeout=120, preexec_fn=cap, check=False,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    one_line(r.returncode, r.stderr, 2, "p.part.gz", "decompresses to more than")
    peak = int(r.stderr.split("maxrss")[1].split()[0])
    base = subprocess.run([sys.executable, "-c", code, "plan", mtx, "--partition", tmp_path / "missing.part",
                           "-o", tmp_path / "x.plan"], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    base_peak = int(base.stderr.split("maxrss")[1].split()[0])
    assert peak - base_peak <= 2 * size + (200 << 20), (peak, base_peak, size)
    assert listing(tmp_path) == ["g.plan", "p.part.gz"]


def _workers(marker: str) -> list[int]:
    """Every live process of the job (launcher and workers: the marker is in their environment)."""
    return live_pids(environ=marker)


def _ranks(marker: str) -> list[int]:
    """The job's live worker processes."""
    return live_pids(cmdline=("partplan.runtime.worker",), environ=marker)


def _build_with_fault(tmp_path: Path, spec: str, **env_extra):
    """``partplan plan g.chunked --nprocs 2`` with the fault ``spec`` (tests/faults/sitecustomize.py):
    (Popen, marker in the workers' environment)."""
    from partplan.io.chunked import write_chunked
    write_chunked(_graph(), tmp_path / "g.chunked", chunks=2)
    np.save(tmp_path / "p.npy", np.arange(N) % 2)
    faults = Path(__file__).resolve().parent
    marker = f"trust-fault-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, OMP_NUM_THREADS="1", KILL_AT_EXCHANGE=spec, FAULT_MARKER=marker, **env_extra,
               PYTHONPATH=os.pathsep.join([str(faults)] + ([os.environ["PYTHONPATH"]]
                                                             if os.environ.get("PYTHONPATH") else [])))
    p = subprocess.Popen(PARTPLAN + ["plan", "g.chunked", "--partition", "p.npy", "-o", "x.plan", "--nprocs", "2",
                                     "--timeout", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=tmp_path, env=env)
    return p, marker


@pytest.mark.dist
@pytest.mark.slow
def test_sigterm_during_the_distributed_build_stops_workers_and_leaves_nothing(tmp_path):
    # rank 1 sleeps in the write stage's first allgather, after rank 0 made the temporary plan folder
    p, marker = _build_with_fault(tmp_path, "1:1:allgather_object@_write", FAULT_ACTION="pause")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (len(_ranks(marker)) == 2 and len(listing(tmp_path)) > 2):
        time.sleep(0.1)
    assert len(_ranks(marker)) == 2, "the build's workers did not start"
    assert len(listing(tmp_path)) > 2, "no temporary plan folder while the build runs"
    time.sleep(0.5)       # rank 1 is asleep in the write stage, rank 0 waits for it
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    finally:              # never leave the launcher or the paused worker behind
        if p.poll() is None:
            p.kill()
            p.communicate()
        gone_within(_workers(marker))
    assert p.returncode == 143, err
    lines = [ln for ln in err.splitlines()
             if ln.strip() and not ln.startswith(("partplan: compiling", "partplan: kernels compiled"))]
    assert len(lines) == 1 and lines[0].startswith("partplan: interrupted"), err
    deadline = time.monotonic() + 5
    while _workers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _workers(marker) == []
    assert listing(tmp_path) == ["g.chunked", "p.npy"]


@pytest.mark.dist
@pytest.mark.slow
def test_dead_peer_in_the_distributed_build_ends_in_one_line_within_the_timeout(tmp_path):
    t0 = time.monotonic()
    p, marker = _build_with_fault(tmp_path, "1:3:exchange_rows")
    _, err = p.communicate(timeout=120)
    r = subprocess.CompletedProcess(p.args, p.returncode, "", err)
    took = time.monotonic() - t0
    one_line(r.returncode, r.stderr, 2, "rank 1: killed by signal SIGKILL")
    assert took < 30, took
    assert listing(tmp_path) == ["g.chunked", "p.npy"]
    deadline = time.monotonic() + 5                 # no worker alive 5 s after its launcher ended
    while _workers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _workers(marker) == []
