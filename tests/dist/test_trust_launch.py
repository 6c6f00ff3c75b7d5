"""Issue 21, launcher and outputs: signals to the launcher (SIGINT, SIGTERM,
SIGKILL) stop every worker and leave no output, temporary or job folder; a
local job opens no TCP listener off loopback (no TCP store); the rendezvous
secret check; concurrent writers of one output; a planted symlink at a
temporary name; a full disk; an oversized compressed --data."""
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.plan import build_plan, write_plan
from partplan.runtime.spmm import random_rows
from proctools import gone_within, live_pids

pytest.importorskip("torch")

EXE = [sys.executable, "-m", "partplan"]
N = 1500


def _graph():
    rng = np.random.default_rng(0)
    return Graph.from_edges(rng.integers(0, N, 12000), rng.integers(0, N, 12000), n=N, symmetrize=True, name="r")


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    return write_plan(build_plan(_graph(), np.arange(N) % 2, 2), d / "g.plan")


def _env(tmp_path, **kw):
    t = tmp_path / "tmpdir"
    t.mkdir(exist_ok=True)
    return dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(t), **kw)


def _workers(marker: str) -> list[int]:
    """Pids of live workers whose command line mentions ``marker`` (the test's TMPDIR)."""
    return live_pids(cmdline=("partplan.runtime.worker", marker))


def _start_slow(plan, tmp_path, out):
    env = _env(tmp_path)
    p = subprocess.Popen(EXE + ["run", "spmm", str(plan), "--nprocs", "2", "-f", "4", "--repeat", "1000000",
                                "--output", str(out), "--timeout", "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    marker = env["TMPDIR"]
    end = time.monotonic() + 60
    while time.monotonic() < end:  # both workers up, and rank 0's reserved temporary made (the work started)
        if len(_workers(marker)) == 2 and list(out.parent.glob(f".{out.name}.tmp-*")):
            break
        assert p.poll() is None, p.communicate()[1]
        time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("the job did not start")
    time.sleep(0.5)
    return p, marker


def _lines(err: str) -> list[str]:
    """stderr lines, less the CLI's "[run spmm] starting ..." progress notes."""
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[")]


def _listening(pid: int) -> list[str]:
    """Local addresses (hex ip:port as in /proc/net/tcp*) of the LISTEN sockets process ``pid`` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for tab in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{tab}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:
                out.append(f[1])
    return out


LOOPBACK = ("0100007F:", "00000000000000000000000001000000:", "0000000000000000FFFF00000100007F:")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_workers_writes_nothing(plan, tmp_path, sig, code):
    out = tmp_path / "Z.npy"
    p, marker = _start_slow(plan, tmp_path, out)
    workers = _workers(marker)
    if sig == signal.SIGTERM:  # while it runs: nothing listens off loopback, and no TCP store at all
        addrs = [a for w in workers for a in _listening(w)] + _listening(p.pid)
        assert all(a.startswith(LOOPBACK) for a in addrs), addrs
        env = Path(f"/proc/{workers[0]}/environ").read_bytes().split(b"\0")
        assert not any(e.startswith(b"MASTER_PORT=") for e in env)
        # the file store sits in the job's folder, beside the config the worker runs (its last argument;
        # a worker forked from the launcher's zygote shows the fork server's initial environment in /proc)
        config = Path(f"/proc/{workers[0]}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")[-1].decode()
        assert Path(config).name == "config.json" and (Path(config).parent / "store").exists()
        assert Path(config).parent.stat().st_mode & 0o777 == 0o700
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == code, err
    lines = _lines(err)
    assert len(lines) == 1 and lines[0].startswith("partplan: interrupted"), err
    assert gone_within(workers) == []
    assert not out.exists() and list(tmp_path.glob(".Z.npy*")) == []
    assert list(Path(marker).glob("partplan-run-*")) == []


def test_sigkill_of_launcher_takes_workers_down(plan, tmp_path):
    from partplan._atomic import clean_stale
    from partplan.runtime import launch
    out = tmp_path / "Z.npy"
    p, marker = _start_slow(plan, tmp_path, out)
    workers = _workers(marker)
    p.kill()
    p.communicate(timeout=30)
    assert gone_within(workers) == [], "workers outlived a SIGKILLed launcher (PR_SET_PDEATHSIG)"
    assert not out.exists()
    # what a SIGKILLed launcher cannot remove, the next launch / writer of the output removes
    left = list(Path(marker).glob("partplan-run-*"))
    assert left
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = marker
    import tempfile
    tempfile.tempdir = None
    try:
        assert sorted(launch._sweep_stale_runs()) == sorted(str(x) for x in left)
    finally:
        if old is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
    # rank 0's temporary of Z.npy, when the killed job left one (it may leave none), is removed by
    # the next writer's clean-up; none remains either way
    leftovers = sorted(tmp_path.glob(".Z.npy*"))
    writers = [int(x.name.split("-")[1]) for x in leftovers]   # .Z.npy.tmp-PID-…: gone before the clean-up
    assert gone_within(writers) == []
    # the kernel may release a dead writer's flock a moment after its pid is gone (the file's last
    # reference is dropped asynchronously under load): clean_stale keeps a locked temporary, a later
    # call removes it
    removed, end = [], time.monotonic() + 10
    while True:
        removed += clean_stale(out)
        if not list(tmp_path.glob(".Z.npy*")) or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert sorted(removed) == leftovers and list(tmp_path.glob(".Z.npy*")) == []


def test_worker_exits_when_launcher_already_gone(tmp_path):
    """The race PR_SET_PDEATHSIG leaves: the launcher died before the worker's prctl."""
    cfg = tmp_path / "c.json"
    cfg.write_text("{}")
    r = subprocess.run([sys.executable, "-m", "partplan.runtime.worker", str(cfg)], capture_output=True, text=True,
                       env=dict(os.environ, PARTPLAN_LAUNCHER_PID="1"), timeout=60)
    assert r.returncode == 137 and r.stderr == ""


def test_concurrent_writers_each_end_in_a_correct_file(plan, tmp_path):
    out = tmp_path / "Z.npy"
    env = _env(tmp_path, PARTPLAN_SECRET="s3cret")   # the same secret on every rank passes the rendezvous check
    procs = [subprocess.Popen(EXE + ["run", "spmm", str(plan), "--nprocs", "2", "-f", "4", "--repeat", "1",
                                     "--output", str(out), "--timeout", "30"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    ref = _graph().to_scipy() @ random_rows(np.arange(N), 4, 0, "float64")
    Z = np.load(out)
    assert np.abs(Z - ref).max() < 1e-4 and np.abs(Z).max() > 0
    assert list(tmp_path.glob(".Z.npy*")) == []


def test_planted_symlinks_at_temp_names_redirect_nothing(plan, tmp_path, monkeypatch):
    from partplan._atomic import atomic_path, create_temp, temp_prefix
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "Z.npy"
    # the old fixed name, and the next name the writer would draw
    (tmp_path / ".Z.npy.partial").symlink_to(victim)
    names = iter(["0123456789abcdef", "fedcba9876543210"])
    import partplan._atomic as atomic
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda k: next(names))
    (tmp_path / f"{temp_prefix(out)}0123456789abcdef.npy").symlink_to(victim)
    fd, tmp = create_temp(out, suffix=".npy")
    os.close(fd)
    assert tmp.name.endswith("fedcba9876543210.npy") and not tmp.is_symlink()
    os.unlink(tmp)
    monkeypatch.undo()
    # a temporary swapped for a symlink while it is written is refused, nothing lands in the victim
    from partplan.errors import OutputPathError
    with pytest.raises(OutputPathError, match="replaced"):
        with atomic_path(tmp_path / "r.json") as t:
            os.unlink(t)
            t.symlink_to(victim)
    assert victim.read_text() == "keep me" and not (tmp_path / "r.json").exists()
    r = subprocess.run(EXE + ["run", "spmm", str(plan), "--backend", "local", "-f", "4", "--repeat", "1",
                              "--output", str(out)], capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "keep me" and np.load(out).shape == (N, 4)


_ENOSPC_SITE = """
import errno, os
def _full(fd, offset, length):
    raise OSError(errno.ENOSPC, "No space left on device")
os.posix_fallocate = _full
"""


def _one_error(r, *words):
    lines = _lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("partplan: error:"), r.stderr
    for w in words:
        assert w in lines[0], r.stderr


@pytest.mark.parametrize("backend", ["local", "gloo"])
def test_full_disk_is_one_error_before_work_faked(plan, tmp_path, backend):
    """ENOSPC faked: posix_fallocate replaced through a sitecustomize on PYTHONPATH (launcher and workers)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_ENOSPC_SITE)
    env = _env(tmp_path, PYTHONPATH=str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = ["--backend", "local"] if backend == "local" else ["--nprocs", "2", "--timeout", "30"]
    t0 = time.monotonic()
    r = subprocess.run(EXE + ["run", "spmm", str(plan), "-f", "4", "--repeat", "100000", "--output",
                              str(tmp_path / "Z.npy")] + args, capture_output=True, text=True, env=env, timeout=120)
    assert time.monotonic() - t0 < 60  # refused before the 100000 repeats
    _one_error(r, "Z.npy", "not enough space")
    assert list(tmp_path.glob("*Z.npy*")) == []


def test_full_tmpfs_is_one_error(plan, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        r = subprocess.run(EXE + ["run", "spmm", str(plan), "--backend", "local", "-f", "64", "--repeat", "1",
                                  "--output", str(mnt / "Z.npy")], capture_output=True, text=True,
                           env=_env(tmp_path), timeout=120)
        _one_error(r, "Z.npy", "not enough space")
        assert os.listdir(mnt) == []
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_write_that_runs_out_of_space_is_one_output_error(tmp_path):
    from partplan._atomic import atomic_path
    from partplan.errors import OutputPathError
    with pytest.raises(OutputPathError, match="not enough space"):
        with atomic_path(tmp_path / "w.pt"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert os.listdir(tmp_path) == []


def _data(path, x, n, compressed):
    kw = dict(y=np.arange(n) % 3, train_mask=np.arange(n) % 2 == 0, val_mask=np.arange(n) % 4 == 1,
              test_mask=np.arange(n) % 4 == 3)
    (np.savez_compressed if compressed else np.savez)(path, x=x, **kw)


def test_compressed_data_bomb_refused_from_headers(tmp_path, monkeypatch):
    from partplan.nn.data import DataError, check_data, read_rows
    n = 1000
    p = tmp_path / "bomb.npz"
    _data(p, np.zeros((n, 20000), np.float32), n, True)   # 76 MiB of zeros in ~80 KB
    assert p.stat().st_size < 200_000
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "32M")
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DataError, match="x.*PARTPLAN_MAX_BYTES"):
        check_data(p, n)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")   # 8 MiB each: 200 rows (15 MiB) do not fit, 50 rows do
    with pytest.raises(DataError, match="200 rows"):
        read_rows(p, np.arange(200))
    assert read_rows(p, np.arange(0, 1000, 20))["x"].shape == (50, 20000)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 40_000  # KiB: never inflated whole


def test_data_header_must_match_zip_record(tmp_path):
    import zipfile
    from partplan.nn.data import DataError, check_data
    n = 100
    p = tmp_path / "d.npz"
    _data(p, np.ones((n, 4), np.float32), n, False)
    with zipfile.ZipFile(p) as zf:   # a crafted member: valid CRC, header claiming 9 columns over 4 columns of data
        members = {k: zf.read(k) for k in zf.namelist()}
    members["x.npy"] = members["x.npy"].replace(b"'shape': (100, 4)", b"'shape': (100, 9)")
    with zipfile.ZipFile(p, "w") as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    with pytest.raises(DataError, match="field 'x'.*zip records"):
        check_data(p, n)
    raw = bytearray(p.read_bytes())   # a flipped data byte: bad CRC, still one DataError
    i = raw.find(b"'shape': (100, 9)")
    raw[i:i + 17] = b"'shape': (100, 4)"
    p.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="field 'x'"):
        check_data(p, n)


@pytest.mark.parametrize("compressed", [False, True])
def test_streamed_rows_equal_the_array(tmp_path, compressed, monkeypatch):
    from partplan.nn import data
    monkeypatch.setattr(data, "STREAM_BYTES", 1000)   # many chunks
    n = 700
    x = np.random.default_rng(1).standard_normal((n, 6))
    for fortran in (False, True):
        p = tmp_path / f"d{int(fortran)}.npz"
        _data(p, np.asfortranarray(x) if fortran else x, n, compressed)
        ids = np.random.default_rng(2).permutation(n)[:333]
        assert np.array_equal(data.read_rows(p, ids)["x"], x[ids])
        assert data.check_data(p, n).f == 6


def _worker_cfg(tmp_path):
    cfg = {"entry": "partplan.runtime.launch:_probe_entry", "backend": "gloo", "timeout": 20}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return path


def test_secret_mismatch_is_one_error_on_every_rank(tmp_path):
    """Two ranks on one file store, different PARTPLAN_SECRET: both refuse."""
    path = _worker_cfg(tmp_path)
    store = tmp_path / "store"
    procs = []
    for r, secret in enumerate(["alpha", "beta"]):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", PARTPLAN_STORE=str(store), GLOO_SOCKET_IFNAME="lo",
                   PARTPLAN_SECRET=secret, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-m", "partplan.runtime.worker", str(path)], env=env,
                                      stderr=subprocess.PIPE, text=True))
    for r, p in enumerate(procs):
        _, err = p.communicate(timeout=60)
        lines = _lines(err)
        assert p.returncode == 2 and len(lines) == 1, err
        assert f"rank {r}: rendezvous check failed" in lines[0] and "PARTPLAN_SECRET" in lines[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_outside_a_launch_is_one_line_and_no_output(tmp_path, sig):
    """SIGTERM / SIGHUP while a command works in this process (no workers):
    exit 128 + signal, one line, and the output being written is not left
    behind (the atomic writer's temporary is removed as the stack unwinds)."""
    code = f"""
import os, signal, sys
import partplan.cli.datasets as d
from partplan._atomic import atomic_path
def slow(args):
    with atomic_path({str(tmp_path / 'out.npz')!r}) as tmp:
        open(tmp, 'wb').write(b'partial')
        os.kill(os.getpid(), {int(sig)})
    return 0
d.run_generate = slow
from partplan.cli.main import main
sys.exit(main(['datasets', 'generate', 'rmat', '--scale', '4', '-o', {str(tmp_path / 'out.npz')!r}]))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 128 + int(sig), r.stderr
    assert r.stderr.strip().splitlines() == [f"partplan: interrupted ({signal.Signals(sig).name})"]
    assert os.listdir(tmp_path) == []
