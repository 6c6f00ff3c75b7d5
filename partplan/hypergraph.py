"""The :class:`Hypergraph`: nets (hyperedges) over vertices, in CSR arrays.

Net ``e`` has pins ``pins[net_ptr[e]:net_ptr[e+1]]``. This is the container the
hMetis ``.hgr`` reader returns and the column-net model produces; the
partitioners (mtkahypar, kahypar) consume it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import GraphFormatError


@dataclass(frozen=True, eq=False)
class Hypergraph:
    """Attributes: n vertices, net_ptr int64[m+1], pins int64[total pins],
    net_weights int64[m] or None, vertex_weights int64[n] or None, name."""

    n: int
    net_ptr: np.ndarray
    pins: np.ndarray
    net_weights: np.ndarray | None = None
    vertex_weights: np.ndarray | None = None
    name: str = "hypergraph"

    def __post_init__(self):
        from ._args import INT_MAX, check_int
        from .parts import first_fraction, first_past_int64
        object.__setattr__(self, "n", check_int("n (vertices)", self.n, hi=INT_MAX, error=GraphFormatError))
        for name in ("net_ptr", "pins"):     # integers as they are (numpy would truncate 2.5 to 2)
            a = np.asarray(getattr(self, name))
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise GraphFormatError(f"must be a 1-D integer array, got {a.ndim}-D {a.dtype}", field=name)
        ptr = np.ascontiguousarray(self.net_ptr, dtype=np.int64)
        pins = np.ascontiguousarray(self.pins, dtype=np.int64)
        object.__setattr__(self, "net_ptr", ptr)
        object.__setattr__(self, "pins", pins)
        if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != pins.size or np.any(np.diff(ptr) < 0):
            raise GraphFormatError("net_ptr must start at 0, be non-decreasing and end at the pin count",
                                   field="net_ptr")
        if pins.size and (pins.min() < 0 or pins.max() >= self.n):
            raise GraphFormatError(f"pin id out of range [0, {self.n})", field="pins")
        for name, arr, size in (("net_weights", self.net_weights, self.m),
                                ("vertex_weights", self.vertex_weights, self.n)):
            if arr is not None:
                raw = np.asarray(arr)
                if raw.dtype.kind == "f" and raw.size:   # whole numbers only: a cast cuts 1.5 to 1, wraps 1e300
                    i = first_fraction(raw)
                    if i >= 0:
                        raise GraphFormatError(f"{name}[{i}] = {raw.flat[i].item()!r} is not an integer", field=name)
                    i = first_past_int64(np.abs(raw.ravel()))
                    if i >= 0:
                        raise GraphFormatError(f"{name}[{i}] = {raw.flat[i].item()!r} does not fit in 64 bits",
                                               field=name)
                elif raw.size and raw.dtype.kind not in "iub":
                    raise GraphFormatError(f"{name} must hold integers, got dtype {raw.dtype}", field=name)
                a = np.ascontiguousarray(raw, dtype=np.int64)
                if a.shape != (size,) or (a.size and a.min() < 0):
                    raise GraphFormatError(f"{name} must be {size} non-negative integers", field=name)
                object.__setattr__(self, name, a)

    @property
    def m(self) -> int:
        """Number of nets."""
        return self.net_ptr.size - 1

    @property
    def num_pins(self) -> int:
        return int(self.pins.size)

    @property
    def net_of_pin(self) -> np.ndarray:
        """int64[pins]: the net each pin belongs to."""
        return np.repeat(np.arange(self.m, dtype=np.int64), np.diff(self.net_ptr))

    def connectivity(self, part: np.ndarray, k: int) -> np.ndarray:
        """int64[m]: λ_e, the number of distinct parts among the pins of each net."""
        keys = np.unique(self.net_of_pin * k + part[self.pins])
        return np.bincount(keys // k, minlength=self.m).astype(np.int64)

    def km1(self, part: np.ndarray, k: int) -> int:
        """Σ_e w_e (λ_e − 1) over nets with at least one pin (the KaHyPar objective)."""
        lam = self.connectivity(part, k)
        w = self.net_weights if self.net_weights is not None else np.ones(self.m, dtype=np.int64)
        return int(np.sum(w * np.maximum(lam - 1, 0)))

    def cut(self, part: np.ndarray, k: int) -> int:
        """Σ_e w_e [λ_e > 1] (cut-net metric)."""
        lam = self.connectivity(part, k)
        w = self.net_weights if self.net_weights is not None else np.ones(self.m, dtype=np.int64)
        return int(np.sum(w * (lam > 1)))

    def __repr__(self) -> str:
        return f"Hypergraph({self.name!r}, n={self.n}, m={self.m}, pins={self.num_pins})"
