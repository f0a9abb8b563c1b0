"""Stand-in for ``tensorrt_llm/_torch/shared_tensor/shared_tensor.py``.

Upstream (@ 26f204627ad82077ec8490879ef633c6968e7b1c) turns a torch tensor into
a dict of CUDA-IPC (``method_key`` 1) or shared-CPU-storage (``method_key`` 2)
handles, and ``from_dict`` reads only the keys it needs (extra keys are
ignored). Here the "handle" is a CPU-style dict (``method_key`` 2) with the
same key names, and the storage travels INLINE, base64-encoded, under
``storage_handle`` (so handles survive pickling into a spawned worker, and a
handle is JSON-compatible, as upstream's ``dump_to_dict`` says its dicts are).
A handle whose ``storage_handle`` is ``None`` is "shape only": restoring it
gives zeros of ``tensor_size`` (used for the fake encoder embeddings, which
can be large).

One use, as upstream: each ``dump_to_dict`` adds one reference to the shared
file and each rebuild (``from_dict``) removes one, so a dumped handle serves
exactly one consumer; the next rebuild fails with upstream's message. The
count lives in the producing process (a handle rebuilt in a spawned worker
that never saw the dump is not counted there).
"""

import base64
import itertools
import os
import threading
from typing import Any, Dict, Optional

import numpy as np

_REFS: Dict[str, int] = {}
_REFS_LOCK = threading.Lock()
_NAMES = itertools.count()


class _SharedTensorRebuildMethodRegistry:
    REBUILD_CUDA = 1
    REBUILD_CPU = 2


class SharedTensorContainer:
    def __init__(self, array: Optional[np.ndarray], meta: Dict[str, Any]) -> None:
        self._array = array
        self._meta = meta

    @classmethod
    def from_tensor(cls, tensor: np.ndarray, *, shape_only: bool = False) -> "SharedTensorContainer":
        arr = np.ascontiguousarray(np.asarray(tensor))
        meta = {
            "method_key": _SharedTensorRebuildMethodRegistry.REBUILD_CPU,
            "tensor_size": [int(d) for d in arr.shape],
            "tensor_stride": [int(s // max(arr.itemsize, 1)) for s in arr.strides],
            "tensor_storage_offset": 0,
            "storage_handle": None if shape_only else base64.b64encode(arr.tobytes()).decode("ascii"),
            "storage_size": int(arr.nbytes),
            "storage_dtype": str(arr.dtype),
            "manager_handle": f"/torch_{os.getpid()}_{next(_NAMES)}",
        }
        return cls(arr, meta)

    def dump_to_dict(self) -> Dict[str, Any]:
        with _REFS_LOCK:
            name = self._meta["manager_handle"]
            _REFS[name] = _REFS.get(name, 0) + 1
        return dict(self._meta)

    @staticmethod
    def _consume(handle: Dict[str, Any]) -> None:
        name = handle.get("manager_handle")
        with _REFS_LOCK:
            if name not in _REFS:
                return  # dumped in another process: not counted here
            if _REFS[name] <= 0:
                raise ValueError(f"Failed to deserialize tensor information: unable to open shared memory "
                                 f"object <{name}> in read-write mode: No such file or directory (2)")
            _REFS[name] -= 1

    @classmethod
    def from_dict(cls, handle: Dict[str, Any]) -> "SharedTensorContainer":
        # Read only what is needed; any extra key is ignored (as upstream).
        cls._consume(handle)
        shape = tuple(int(d) for d in handle["tensor_size"])
        dtype = np.dtype(handle.get("storage_dtype", "float32"))
        raw = handle.get("storage_handle")
        if raw is None:
            arr = np.zeros(shape, dtype=dtype)
        else:
            arr = np.frombuffer(base64.b64decode(raw), dtype=dtype).reshape(shape).copy()
        return cls(arr, dict(handle))

    def get_local_view(self) -> np.ndarray:
        return self._array
