"""Fixtures shared by the fault tests."""
from __future__ import annotations

import signal

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
