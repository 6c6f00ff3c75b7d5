"""Array kernels of the interpreter: one table for numpy (LocalComm, ``validate``)
and one for torch (TorchComm, CPU or CUDA). Buffers are 2-D ``rows × f``.

Local SpMM kernels: ``scipy`` (CSR × dense, numpy arrays or torch CPU tensors
through zero-copy numpy views) and ``torch`` (``torch.sparse_csr_tensor`` ×
dense; the only one on CUDA). Inside a row both sum the nonzeros in stored
order, so with the plan's global column order a 1D float64 product is bitwise
scipy's global ``A @ H`` (checked by the tests). ``auto`` = ``scipy`` on CPU
(measured faster here, see docs/design/runtime.md) and ``torch`` on CUDA.
"""
from __future__ import annotations

import numpy as np

KERNELS = ("auto", "native", "scipy", "torch")  # native = scipy (the CPU kernel)

try:  # scipy's CSR x dense kernel (what csr_matrix @ ndarray calls), to write into a given buffer
    from scipy.sparse._sparsetools import csr_matvecs as _scipy_matvecs
except ImportError:  # pragma: no cover - a scipy without it: the operator path
    _scipy_matvecs = None


def _csr_matvecs(mat, x, out, accumulate: bool) -> None:
    """``out (+)= mat @ x`` for numpy ``x`` / ``out``: scipy's kernel adding each
    row's nonzeros into ``out`` one by one in stored order (what an overlapped
    step's late part relies on). Shapes are checked first: the kernel writes
    through raw pointers."""
    if x.ndim != 2 or out.ndim != 2 or x.shape[0] != mat.shape[1] or out.shape != (mat.shape[0], x.shape[1]):
        from ..errors import PlanError
        raise PlanError(f"local SpMM of a {mat.shape[0]} x {mat.shape[1]} matrix with {tuple(x.shape)} rows into "
                        f"{tuple(out.shape)}: the shard's CSR does not fit its buffers")
    if _scipy_matvecs is not None and (not x.flags.c_contiguous or x.dtype != mat.dtype):
        x = np.ascontiguousarray(x, dtype=mat.dtype)  # the in-order kernel, not a separate sum added afterwards
    if (_scipy_matvecs is not None and out.flags.c_contiguous and x.dtype == out.dtype == mat.dtype):
        if not accumulate:
            out.fill(0)
        if mat.nnz and out.shape[1]:
            _scipy_matvecs(mat.shape[0], mat.shape[1], out.shape[1], mat.indptr, mat.indices, mat.data,
                           x.ravel(), out.ravel())
    elif accumulate:
        out += mat @ x
    else:
        out[...] = mat @ x



def readonly_tensor(a):
    """``a`` (numpy) as a CPU tensor sharing its memory, for kernel inputs, which no kernel writes: a
    plan's arrays are often read-only (memory-mapped shards), where torch warns that writing would be
    undefined; the warning is silenced here, without a copy."""
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(np.ascontiguousarray(a))

class NumpyOps:
    """numpy buffers; scipy SpMM."""

    name = "numpy"
    kernel = "scipy"
    in_order_rows = True  # the SpMM adds each row's nonzeros one by one in stored order

    def __init__(self, dtype="float64"):
        self.dtype = np.dtype(dtype)

    def index(self, a: np.ndarray):
        return np.ascontiguousarray(a, dtype=np.int64)

    def empty(self, rows: int, f: int):
        return np.empty((rows, f), dtype=self.dtype)

    def zeros(self, rows: int, f: int):
        return np.zeros((rows, f), dtype=self.dtype)

    def fill(self, buf, value: float):
        buf.fill(value)

    def take(self, src, idx, out):
        np.take(src, idx, axis=0, out=out)

    def index_add(self, dst, idx, src):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by Executor.check_finite
            np.add.at(dst, idx, src)

    def matrix(self, indptr, indices, data, shape):
        import scipy.sparse as sp
        d = np.ones(indices.size, dtype=self.dtype) if data is None else _cast_quietly(data, self.dtype)
        return sp.csr_matrix((d, indices, indptr), shape=shape)

    def spmm(self, mat, x, out):
        self.spmm_into(mat, x, out)

    def spmm_into(self, mat, x, out, accumulate: bool = False):
        """``out = mat @ x`` (``accumulate``: ``out += mat @ x``), written in
        place: scipy's own CSR × dense kernel, which is what ``mat @ x`` runs
        into a zeroed temporary — so bitwise its result, without the temporary."""
        _csr_matvecs(mat, x, out, accumulate)

    def transpose_matrix(self, mat):
        return mat.T.tocsr()

    def to_numpy(self, a) -> np.ndarray:
        return a

    def from_numpy(self, a: np.ndarray):
        return np.ascontiguousarray(a, dtype=self.dtype)

    def synchronize(self):
        pass

    def has_nan(self, a) -> bool:
        return bool(np.isnan(a).any())

    def input_problem(self, x) -> str | None:
        """Why the executor cannot take ``x`` as an input buffer (None: it can)."""
        if not isinstance(x, np.ndarray):
            return f"input is a {type(x).__name__}, the executor computes on numpy arrays"
        if not np.can_cast(x.dtype, self.dtype, "safe"):
            return f"input dtype {x.dtype} does not fit the executor's {self.dtype} (cast it first)"
        return None


class TorchOps:
    """torch buffers on ``device``; SpMM by scipy (CPU) or torch sparse CSR."""

    name = "torch"

    def __init__(self, dtype="float32", device="cpu", kernel: str = "auto"):
        import torch
        self.torch = torch
        self.device = torch.device(device)
        self.dtype = getattr(torch, str(np.dtype(dtype)))
        self.np_dtype = np.dtype(dtype)
        if kernel not in KERNELS:
            from ..errors import PlanError
            raise PlanError(f"kernels must be one of {', '.join(KERNELS)}, got {kernel!r}")
        if kernel == "native":
            kernel = "scipy"
        if kernel == "auto":
            kernel = "torch" if self.device.type == "cuda" else "scipy"
        if kernel == "scipy" and self.device.type != "cpu":
            from ..errors import PlanError
            raise PlanError("the native (scipy) SpMM kernel runs on CPU tensors only; use kernels 'torch' "
                            "or 'auto' on CUDA")
        self.kernel = kernel

    @property
    def in_order_rows(self) -> bool:
        """Whether the SpMM adds each row's nonzeros one by one in stored order
        (scipy's kernel does; torch's sparse kernels give no such promise)."""
        return self.kernel == "scipy"

    def index(self, a: np.ndarray):
        a = np.ascontiguousarray(a, dtype=np.int64)
        if not a.flags.writeable:  # memory-mapped shard arrays: torch wants a writable buffer
            a = a.copy()
        return self.torch.from_numpy(a).to(self.device)

    def empty(self, rows: int, f: int):
        return self.torch.empty((rows, f), dtype=self.dtype, device=self.device)

    def zeros(self, rows: int, f: int):
        return self.torch.zeros((rows, f), dtype=self.dtype, device=self.device)

    def fill(self, buf, value: float):
        buf.fill_(value)

    def take(self, src, idx, out):
        self.torch.index_select(src, 0, idx, out=out)

    def index_add(self, dst, idx, src):
        dst.index_add_(0, idx, src)

    def matrix(self, indptr, indices, data, shape):
        if self.kernel == "scipy":
            return NumpyOps(self.np_dtype).matrix(indptr, indices, data, shape)
        import warnings

        t = self.torch
        vals = (t.ones(indices.size, dtype=self.dtype) if data is None
                else readonly_tensor(_cast_quietly(data, self.np_dtype)))
        with warnings.catch_warnings():   # torch's notice that its CSR support is in beta, said at every build
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return t.sparse_csr_tensor(readonly_tensor(np.asarray(indptr, dtype=np.int64)),
                                       readonly_tensor(np.asarray(indices, dtype=np.int64)),
                                       vals, size=shape, check_invariants=False).to(self.device)

    def transpose_matrix(self, mat):
        if self.kernel == "scipy":
            return mat.T.tocsr()
        return mat.t().to_sparse_csr()

    def spmm_into(self, mat, x, out, accumulate: bool = False):
        """``out = mat @ x`` (``accumulate``: ``out += mat @ x``), in place."""
        if tuple(out.shape) != (mat.shape[0], x.shape[1]) or x.shape[0] != mat.shape[1]:
            from ..errors import PlanError
            raise PlanError(f"local SpMM of a {mat.shape[0]} x {mat.shape[1]} matrix with {tuple(x.shape)} rows "
                            f"into {tuple(out.shape)}: the shard's CSR does not fit its buffers")
        if self.kernel == "scipy":
            _csr_matvecs(mat, x.numpy(), out.numpy(), accumulate)
        elif mat.shape[0] == 0 or x.shape[1] == 0 or not mat._nnz():
            if not accumulate:
                out.zero_()
        elif accumulate:
            out.add_(self.torch.sparse.mm(mat, x))
        else:
            out.copy_(self.torch.sparse.mm(mat, x))

    def spmm(self, mat, x, out):
        self.spmm_into(mat, x, out)

    def to_numpy(self, a) -> np.ndarray:
        return a.detach().cpu().numpy()

    def from_numpy(self, a: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(a, dtype=self.np_dtype)).to(self.device)

    def synchronize(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def has_nan(self, a) -> bool:
        return bool(self.torch.isnan(a).any())

    def input_problem(self, x) -> str | None:
        """Why the executor cannot take ``x`` as an input buffer (None: it can)."""
        if not isinstance(x, self.torch.Tensor):
            return f"input is a {type(x).__name__}, the executor computes on torch tensors"
        if x.dtype != self.dtype:
            return f"input dtype {x.dtype} differs from the executor's {self.dtype}"
        want = self.device
        if x.device.type != want.type or (want.index is not None and x.device.index not in (None, want.index)
                                          and want.type == "cuda"):
            return f"input is on {x.device}, the executor's buffers on {want}"
        return None


def _cast_quietly(data, dtype) -> np.ndarray:
    """``data`` as ``dtype``; a value beyond its range becomes ±inf without numpy's warning (the
    run's finite check names the step and the cause, Executor.check_finite)."""
    with np.errstate(over="ignore"):
        return np.asarray(data, dtype=dtype)
