"""numpy <-> torch for the rank processes, bfloat16 included.

The harness builds every buffer in numpy (so the coordinator can rebuild it
without torch) and moves it to torch bit for bit through a uint8 view.
"""

from __future__ import annotations

import numpy as np
import torch

from ..spec import as_dtype, dtype_name

TORCH_DTYPES = {
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

NUMPY_DTYPES = {torch_dtype: as_dtype(name) for name, torch_dtype in TORCH_DTYPES.items()}


def to_torch(array: np.ndarray, device: str = "cpu") -> torch.Tensor:
    """A 1-d tensor with the array's bits and dtype (a copy)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    dtype = TORCH_DTYPES[dtype_name(flat.dtype)]
    if flat.size == 0:  # an empty byte view has stride 0, which torch will not reinterpret
        return torch.empty(0, dtype=dtype, device=device)
    return torch.from_numpy(flat.view(np.uint8).copy()).view(dtype).to(device)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's bits as a numpy array of the matching dtype (a copy, on the CPU)."""
    flat = tensor.detach().reshape(-1).contiguous().cpu()
    if flat.numel() == 0:
        return np.empty(0, dtype=NUMPY_DTYPES[tensor.dtype])
    return flat.view(torch.uint8).numpy().copy().view(NUMPY_DTYPES[tensor.dtype])

