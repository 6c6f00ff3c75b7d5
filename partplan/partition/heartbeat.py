"""A heartbeat line while a long compiled call runs (a backend, refinement passes).

``with _heartbeat(progress, backend): ...`` calls ``progress("partitioning with
<backend>: N s elapsed")`` from a daemon thread after HEARTBEAT_FIRST_S
seconds, then every HEARTBEAT_EVERY_S seconds, so a user sees the work move.
"""
from __future__ import annotations

import time


# heartbeat while a backend runs (seconds): first message, then every HEARTBEAT_EVERY_S
HEARTBEAT_FIRST_S = 2.0
HEARTBEAT_EVERY_S = 5.0


class _heartbeat:
    """Context manager: while the body runs, a daemon thread calls
    ``progress("partitioning with <backend>: N s elapsed")`` after
    HEARTBEAT_FIRST_S, then every HEARTBEAT_EVERY_S; no thread when ``progress``
    is None. The thread is stopped and joined on exit, error or not."""

    def __init__(self, progress, backend, label: str | None = None):
        self.progress, self.backend, self.thread = progress, backend, None
        self.label = f"partitioning with {backend}" if label is None else label

    def __enter__(self):
        if self.progress is None:
            return self
        import threading
        self.stop = threading.Event()
        t0 = time.perf_counter()

        def beat():
            wait = HEARTBEAT_FIRST_S
            while not self.stop.wait(wait):
                try:
                    self.progress(f"{self.label}: {time.perf_counter() - t0:.0f} s elapsed")
                except Exception:  # a broken progress callback must not kill the partition
                    return
                wait = HEARTBEAT_EVERY_S

        self.thread = threading.Thread(target=beat, name="partplan-heartbeat", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
        return False
