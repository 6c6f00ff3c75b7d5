"""Count what a stretch of torch code asks of a device, on any device (the CPU too).

:class:`OpCounter` is a context manager that records, per *section* (started
by :meth:`OpCounter.mark`, e.g. once per BFS level):

* ``kernels`` — the aten operators dispatched that do work: every operator
  that reaches the dispatcher minus views and metadata (``is_view``,
  ``empty*``, ``detach``, ``alias``, ``lift_fresh``, ``_local_scalar_dense``).
  On CUDA each is (about) one kernel launch; on the CPU the same count is what
  the CUDA run would launch, since the torch code path is the same.
* ``syncs`` — the operations that on CUDA make the host wait for the device:
  a device → host copy (``Tensor.tolist``, ``.cpu``, ``.item``,
  ``int()`` / ``float()`` / ``bool()`` / ``__index__`` of a tensor, a
  ``_to_copy`` / ``copy_`` to the CPU from another device) and the operators
  whose output size depends on the data (``aten::nonzero``,
  ``aten::masked_select``, ``aten::unique*``, ``aten::bincount``,
  ``aten::equal``, ``aten::is_nonzero``, advanced indexing or index_put by a
  boolean mask, ``repeat_interleave`` without ``output_size``). On the CPU
  every such call is counted: everything is "the device" there, which is
  the conservative reading (a ``.cpu()`` of a host-only tensor counts too).
  ``.numpy()`` is not counted: it only works on host tensors, so on CUDA the
  copy is the ``.cpu()`` before it.

Also counted as syncs: calls of ``torch.cuda.synchronize`` and of the
interpreter's ``TorchOps.synchronize`` (a device barrier on CUDA, a no-op on
the CPU: counted all the same, since the CUDA run would wait there).

A section's ``syncs`` is the list of their names, so a test failure says
which one. ``torch.nonzero_static`` and ``repeat_interleave(...,
output_size=)`` are not syncs (their sizes come from the host).

>>> import torch
>>> from partplan.runtime.opcount import OpCounter
>>> a = torch.arange(6)
>>> with OpCounter() as c:
...     c.mark("x"); b = (a * 2).sum(); n = int(b)
...     c.mark("y"); m = a[a > 2]
>>> [(s.label, s.kernels, s.syncs) for s in c.sections]
[('x', 2, ['__int__']), ('y', 2, ['aten::index(bool)'])]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

#: Tensor methods / functions that copy device data to the host (one sync each)
SYNC_METHODS = frozenset({"tolist", "cpu", "item", "__int__", "__float__", "__bool__", "__index__",
                          "__complex__"})
#: aten operators whose output size (or result on the host) depends on device data
SYNC_OPS = frozenset({"aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_dim",
                      "aten::unique_consecutive", "aten::unique_dim_consecutive", "aten::bincount", "aten::equal",
                      "aten::is_nonzero", "aten::_local_scalar_dense", "aten::histc", "aten::masked_scatter_",
                      "aten::nonzero_numpy", "aten::_assert_async"})
#: operators that launch nothing (allocation, metadata)
NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::detach", "aten::alias",
                       "aten::lift_fresh", "aten::lift_fresh_copy", "aten::_local_scalar_dense", "aten::set_",
                       "aten::resize_", "aten::_reshape_alias", "aten::sym_size", "aten::sym_stride",
                       "aten::sym_numel", "aten::sym_storage_offset", "aten::is_same_size"})


@dataclass
class Section:
    """One counted stretch: ``kernels`` launched, ``syncs`` (names), ``ops`` (name → count)."""

    label: object
    kernels: int = 0
    syncs: list = field(default_factory=list)
    ops: dict = field(default_factory=dict)


def _name(func) -> str:
    s = func._schema.name  # "aten::index"
    return s


def _has_bool_index(args) -> bool:
    idx = args[1] if len(args) > 1 else None
    return isinstance(idx, (list, tuple)) and any(
        isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in idx)


def _to_host(func, args, kwargs) -> bool:
    name = _name(func)
    if name == "aten::_to_copy":
        dev = kwargs.get("device")
        src = args[0]
        return dev is not None and torch.device(dev).type == "cpu" and src.device.type != "cpu"
    if name == "aten::copy_":
        dst, src = args[0], args[1]
        return dst.device.type == "cpu" and isinstance(src, torch.Tensor) and src.device.type != "cpu"
    return False


class _Fn(TorchFunctionMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNC_METHODS and args and isinstance(args[0], torch.Tensor) and self.owner.depth == 0:
            self.owner._sync(name)
            self.owner.depth += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                self.owner.depth -= 1
        return func(*args, **(kwargs or {}))


class _Disp(TorchDispatchMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        o = self.owner
        name = _name(func)
        sec = o.current
        sec.ops[name] = sec.ops.get(name, 0) + 1
        if not (func.is_view or name in NO_KERNEL):
            sec.kernels += 1
        if o.depth == 0:
            why = None
            if name in SYNC_OPS:
                why = name
            elif name in ("aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_") \
                    and _has_bool_index(args):
                why = f"{name}(bool)"
            elif name == "aten::repeat_interleave" and kwargs.get("output_size") is None \
                    and (len(args) < 2 or isinstance(args[-1], torch.Tensor) or args[-1] is None):
                why = "aten::repeat_interleave(no output_size)"
            elif _to_host(func, args, kwargs):
                why = f"{name}(to host)"
            if why is not None:
                o._sync(why)
        return func(*args, **kwargs)


class OpCounter:
    """Context manager: per section (:meth:`mark`) the kernels dispatched and the syncing calls."""

    def __init__(self):
        self.sections: list[Section] = []
        self.current = Section(None)
        self.depth = 0
        self._modes = None

    def mark(self, label) -> None:
        """Start a new section named ``label`` (what ran before :meth:`mark`'s first call is dropped)."""
        self.current = Section(label)
        self.sections.append(self.current)

    def _sync(self, name: str) -> None:
        self.current.syncs.append(name)

    def __enter__(self):
        from .ops import TorchOps
        self._patched = []
        for owner, attr, name in ((TorchOps, "synchronize", "TorchOps.synchronize"),
                                  (torch.cuda, "synchronize", "torch.cuda.synchronize")):
            orig = getattr(owner, attr)
            self._patched.append((owner, attr, orig))
            setattr(owner, attr, self._wrap(orig, name))
        self._modes = (_Fn(self), _Disp(self))
        self._modes[0].__enter__()
        self._modes[1].__enter__()
        return self

    def _wrap(self, orig, name):
        def synchronize(*a, **k):
            self._sync(name)
            return orig(*a, **k)
        return synchronize

    def __exit__(self, *exc):
        self._modes[1].__exit__(*exc)
        self._modes[0].__exit__(*exc)
        for owner, attr, orig in self._patched:
            setattr(owner, attr, orig)
        return False

    def table(self) -> list[tuple]:
        """[(label, kernels, number of syncs)] per section."""
        return [(s.label, s.kernels, len(s.syncs)) for s in self.sections]
