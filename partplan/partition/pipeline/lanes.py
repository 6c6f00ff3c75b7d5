"""Independent pieces of the default pipeline side by side, on the cores this process may use.

The pipeline's task list is fixed by the graph, k and the options — never by the number of
cores — and every task's result is taken in the order the tasks were given, so the partition is
the same on one core or sixteen; only the wall time changes. The pieces that run side by side
are the compiled (numba, ``nogil``) kernels of the km1 V-cycles and of the bottleneck
refinements; the C engines (METIS, KaMinPar) hold the GIL for their whole call, so a V-cycle
overlaps with the next start's engine but two engines never overlap.

Tasks run on daemon threads: Ctrl-C reaches the main thread where it waits for a result, and the
process exits without waiting for a kernel that is still running (a ``ThreadPoolExecutor``
joins its threads at exit). With one worker every task runs at once, in the caller's thread
(the order of work of a serial pipeline).

>>> lanes = Lanes(2)
>>> a, b = lanes.submit(sum, [1, 2]), lanes.submit(max, [3, 4])
>>> (a.result(), b.result())
(3, 4)
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from ..._budget import usable_cores as available_cores   # the pipeline's worker count

__all__ = ["Lanes", "Task", "available_cores"]


class Task:
    """One submitted call: :meth:`result` waits for it and returns its value or raises its error."""

    def __init__(self):
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _run(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller by result()
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> Any:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class Lanes:
    """At most ``workers`` submitted calls running at once, each on its own daemon thread
    (``workers == 1``: run at submit, in the caller's thread)."""

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))
        self._slots = threading.BoundedSemaphore(self.workers)

    def submit(self, fn: Callable, *args, **kwargs) -> Task:
        task = Task()
        if self.workers == 1:       # at once, errors and Ctrl-C included, as serial code would
            task._value = fn(*args, **kwargs)
            task._done.set()
            return task

        def body():
            with self._slots:
                task._run(fn, args, kwargs)

        threading.Thread(target=body, daemon=True, name=f"partplan-{getattr(fn, '__name__', 'task')}").start()
        return task
