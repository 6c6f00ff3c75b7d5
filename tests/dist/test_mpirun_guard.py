"""The guard between the --nprocs launcher and mpirun (partplan.partition.pipeline.mpirun_guard),
with a small Python child in mpirun's place that records the signals it gets."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from partplan.partition.pipeline import mpirun_guard

pytestmark = pytest.mark.dist

# in mpirun's place: records each SIGTERM in a file, ends 0.5 s after the first with status 3 (or
# ignores them all with "ignore")
CHILD = textwrap.dedent("""
    import signal, sys, time
    log, mode = sys.argv[1], sys.argv[2]
    def on_term(signum, frame):
        with open(log, "a") as fh:
            fh.write("TERM\\n")
        if mode == "stop":
            time.sleep(0.5)
            sys.exit(3)
    signal.signal(signal.SIGTERM, on_term if mode != "ignore" else signal.SIG_IGN)
    open(log, "a").close()
    while True:
        time.sleep(0.05)
""")


def _guard(tmp_path, mode, grace=5.0):
    log = tmp_path / "log"
    cmd = [sys.executable, "-I", mpirun_guard.__file__, str(os.getpid()), str(grace),
           sys.executable, "-c", CHILD, str(log), mode]
    proc = subprocess.Popen(cmd, start_new_session=True)
    end = time.monotonic() + 30
    while not log.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert log.exists(), "the child did not start"
    return proc, log


def test_three_signals_to_the_guard_are_one_sigterm_to_its_child(tmp_path):
    proc, log = _guard(tmp_path, "stop")
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
        proc.send_signal(sig)
        time.sleep(0.05)
    assert proc.wait(timeout=10) == 3                 # the child's own exit status
    assert log.read_text() == "TERM\n"


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    proc, log = _guard(tmp_path, "ignore", grace=0.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGKILL
    assert 0.4 < time.monotonic() - t0 < 8


def test_the_death_of_the_launcher_is_one_sigterm_to_the_child(tmp_path):
    """A launcher with several threads killed by SIGKILL: the guard's parent-death signal may come
    once per thread; the child gets one SIGTERM and ends by it."""
    out = tmp_path / "pids"
    launcher = textwrap.dedent(f"""
        import os, subprocess, sys, threading, time
        for _ in range(4):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        p = subprocess.Popen([sys.executable, "-I", {mpirun_guard.__file__!r}, str(os.getpid()), "5",
                              sys.executable, "-c", {CHILD!r}, {str(tmp_path / "log")!r}, "stop"],
                             start_new_session=True)
        open({str(out)!r}, "w").write(str(p.pid))
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", launcher])
    log = tmp_path / "log"
    end = time.monotonic() + 30
    while not (log.exists() and out.exists()) and time.monotonic() < end:
        time.sleep(0.02)
    assert log.exists(), "the child did not start"
    guard = int(out.read_text())
    proc.kill()
    proc.wait()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from proctools import gone_within
    assert gone_within([guard], 10.0) == []
    assert log.read_text() == "TERM\n"


def test_a_command_that_cannot_run_is_status_127_and_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-I", mpirun_guard.__file__, str(os.getpid()), "5",
                        str(tmp_path / "no-such-mpirun")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 127
    assert r.stderr.count("\n") == 1 and "cannot run" in r.stderr and "no-such-mpirun" in r.stderr
