"""Fixtures shared by the fault tests."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest


@pytest.fixture
def alarm():
    """A read that blocks fails the test (TimeoutError after 20 s) instead of hanging it."""
    def _boom(*_):
        raise TimeoutError("a reader blocked")
    old = signal.signal(signal.SIGALRM, _boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(opts)``: a small tmpfs mounted under tmp_path (root only; skips otherwise), unmounted after;
    ``mount.fill(d, leave)`` fills it up to ``leave`` free bytes."""
    mounted = []

    def mount(opts: str):
        d = tmp_path / f"mnt{len(mounted)}"
        d.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True)
        if r.returncode:
            pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode(errors='replace').strip()})")
        mounted.append(d)
        return d
    mount.fill = _fill
    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _fill(d, leave: int):
    """Fill the tmpfs ``d`` up to ``leave`` free bytes."""
    st = os.statvfs(d)
    (d / "pad").write_bytes(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))
