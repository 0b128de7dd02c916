"""The spec's reduction ops on torch tensors, hop by hop.

A schedule reduces a value into a cell one hop at a time. :class:`Reduction`
says how, for one (op, dtype), so that the result is the spec's
(:mod:`collspec.spec.ops`):

- the reduction runs on a *working* tensor (:meth:`Reduction.working`);
  messages carry the working representation;
- :meth:`Reduction.combine_` reduces an incoming value into a cell in place:
  ``add_``, ``mul_``, ``minimum``, ``maximum``. Integers wrap; float16 and
  bfloat16 round to their type after every hop, exactly as the models'
  ``Numbers`` algebra does (torch forms each sum or product in float32 and
  rounds once, and float32 holds at least 2p + 2 bits of both types, so
  this is the correctly rounded operation);
- :meth:`Reduction.finish` turns the reduced working value into the result.

``avg`` on floats: the sum, then one division by N formed in float64 and
rounded to the type, as the spec's ``finish``. ``avg`` on integers: the spec
wants the exact mean rounded toward zero, which a wrapping sum cannot give.
Each input x is split as ``x = q*N + r`` with ``0 <= r < N`` (floor
division); the working tensor holds ``(q, r)`` pairs in int64 and the
schedule sums both. The exact mean is ``Q + R/N``: ``Q + R // N`` is its
floor, one more when it is negative and inexact gives truncation. ``Q`` may
wrap in int64, but ``Q + R // N`` is the floor of a mean of int64 values, so
it is in range and its wrapped computation is exact.

Element types are the spec's eight (:data:`DTYPE_NAMES`); any other raises
``TypeError`` and an unknown op ``NotImplementedError``, which conformance
reports as ``unsupported``.
"""

from __future__ import annotations

import torch

from ..spec.ops import OPS

#: torch dtypes collspec specifies, by the spec's names
DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}


def dtype_name(dtype: torch.dtype) -> str:
    """The spec's name of a torch dtype; ``TypeError`` for one it does not specify."""
    if dtype not in DTYPE_NAMES:
        raise TypeError(f"dtype {dtype} is not one collspec specifies; use one of {', '.join(DTYPE_NAMES.values())}")
    return DTYPE_NAMES[dtype]


class Reduction:
    """How to reduce ``dtype`` values under ``op`` across ``ranks`` ranks."""

    def __init__(self, op: str, dtype: torch.dtype, ranks: int):
        if op not in OPS:
            raise NotImplementedError(f"op {op!r} is not one of {', '.join(OPS)}")
        self.name = dtype_name(dtype)
        self.op, self.dtype, self.ranks = op, dtype, ranks
        self.exact_mean = op == "avg" and not dtype.is_floating_point
        self.working_dtype = torch.int64 if self.exact_mean else dtype

    def working(self, tensor: torch.Tensor, copy: bool) -> torch.Tensor:
        """The working form of ``tensor`` (flattened). With ``copy`` False the
        result may be ``tensor`` itself, so a reduction can run in place."""
        if not self.exact_mean:
            if tensor.is_contiguous():
                return tensor.view(-1).clone() if copy else tensor.view(-1)
            return tensor.reshape(-1).contiguous()  # a new tensor either way
        flat = tensor.reshape(-1)
        wide = flat.to(torch.int64)
        q = torch.div(wide, self.ranks, rounding_mode="floor")
        return torch.stack((q, wide - q * self.ranks), dim=1)

    def combine_(self, acc: torch.Tensor, incoming: torch.Tensor) -> None:
        """``acc = acc (op) incoming``, in place."""
        if self.op in ("sum", "avg"):
            acc.add_(incoming)
        elif self.op == "prod":
            acc.mul_(incoming)
        elif self.op == "min":
            torch.minimum(acc, incoming, out=acc)
        else:
            torch.maximum(acc, incoming, out=acc)

    def finish(self, acc: torch.Tensor, out: torch.Tensor) -> None:
        """Write the result of a reduced working tensor into ``out`` (any
        shape with as many elements); ``out`` may be ``acc`` itself."""
        flat = out.view(-1) if out.is_contiguous() else None
        if self.exact_mean:
            n = self.ranks
            q, r = acc[:, 0], acc[:, 1]
            floor = q + torch.div(r, n, rounding_mode="floor")
            result = floor + ((floor < 0) & (r % n != 0)).to(torch.int64)
        elif self.op == "avg" and self.dtype == torch.float64:
            result = acc / self.ranks
        elif self.op == "avg":
            result = acc.to(torch.float64) / self.ranks
        else:
            result = acc
        if flat is not None and result.data_ptr() == flat.data_ptr() and result.dtype == out.dtype:
            return
        if flat is not None:
            flat.copy_(result.reshape(-1))
        else:
            out.copy_(result.reshape(out.shape))
