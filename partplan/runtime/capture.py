"""A step of static shapes replayed as one CUDA graph on CUDA, run eagerly elsewhere.

:class:`Captured` wraps a function ``fn()`` that reads and writes only
tensors it holds (static addresses, static shapes) and never copies device
data to the host. On a CUDA device it warms ``fn`` up on a side stream,
captures it into a :class:`torch.cuda.CUDAGraph` (``torch.cuda.graph``),
checks that one replay gives what one eager call gives from the same state
(bitwise, or within ``rtol``), and from then on :meth:`Captured.__call__`
replays the graph — one launch for the whole step. Anything that goes wrong
(an operator that cannot be captured, a mismatch) leaves ``fn`` eager and
names why in :attr:`Captured.reason`. On the CPU, or with ``enabled=False``,
it is ``fn`` itself.

The warm-up and the check run ``fn`` for real: ``state`` (every tensor that
``fn`` updates in place, e.g. weights and optimizer moments) is restored to
its value before the first call, so wrapping a step does not change what the
job computes.
"""
from __future__ import annotations

import torch


class Captured:
    """``fn`` as a CUDA graph on ``device`` (CUDA only; eager otherwise).

    state : tensors ``fn`` updates in place (restored after warm-up and check), or a
        function returning them (called when capturing).
    outputs : a function returning the tensors ``fn`` writes (compared eager vs replay).
    """

    def __init__(self, fn, device, *, state: list | None = None, outputs=None, enabled: bool | None = None,
                 warmup: int = 2, rtol: float = 0.0):
        self.fn, self.outputs = fn, outputs
        self._state = state if callable(state) else (lambda: list(state or []))
        self.state: list = []
        dev = torch.device(device) if device is not None else torch.device("cpu")
        self.enabled = (dev.type == "cuda" and torch.cuda.is_available()) if enabled is None else bool(enabled)
        self.graph = None
        self.reason = None if self.enabled else f"eager on {dev.type}"
        self.warmup, self.rtol = int(warmup), float(rtol)
        self._tried = False

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def _snapshot(self):
        self.state = list(self._state())  # read when capturing: state made by earlier eager calls counts
        return [t.detach().clone() for t in self.state]

    def _restore(self, snap) -> None:
        with torch.no_grad():
            for t, s in zip(self.state, snap):
                t.copy_(s)

    def _capture(self) -> None:
        self._tried = True
        snap = self._snapshot()
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(self.warmup):
                    self.fn()
            torch.cuda.current_stream().wait_stream(s)
            self._restore(snap)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.fn()
            # check: eager from the snapshot vs one replay from the snapshot
            self._restore(snap)
            self.fn()
            ref = [o.detach().clone() for o in self.outputs()] if self.outputs else []
            self._restore(snap)
            g.replay()
            torch.cuda.synchronize()
            got = self.outputs() if self.outputs else []
            ok = all(torch.equal(a, b) if self.rtol == 0 else
                     torch.allclose(a, b, rtol=self.rtol, atol=self.rtol * float(a.abs().max()) if a.numel() else 0)
                     for a, b in zip(ref, got))
            self._restore(snap)
            if not ok:
                self.reason = "the replay differs from the eager step: running eagerly"
                return
            self.graph = g
        except Exception as exc:  # an operator that cannot be captured: stay eager
            self._restore(snap)
            self.graph = None
            self.reason = f"capture failed ({type(exc).__name__}: {str(exc)[:200]}): running eagerly"

    def __call__(self) -> None:
        if self.enabled and not self._tried:
            self._capture()
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()
