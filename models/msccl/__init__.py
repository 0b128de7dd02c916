"""MSCCL XML: import, a verifier with the executors' concurrent semantics,
and export of the built-in algorithms.

MSCCL files (``<algo>/<gpu>/<tb>/<step>``) are how custom collective
algorithms ship for MSCCL and RCCL. The executors run a GPU's thread blocks
concurrently, so a file that is right when its steps are replayed in
written order can still deadlock, race or compute the wrong sum. This
package reads a file (:mod:`.parse`), models what the executors do with it
(:mod:`.executor`, :mod:`.order`), finds races (:mod:`.races`), runs it
through the one interpreter and checker of :mod:`collspec.models`
(:mod:`.lower`, :mod:`.verify`), warns about format drift (:mod:`.lint`)
and writes the built-in algorithms as MSCCL files (:mod:`.export`).
docs/msccl.md records what was read in which executor source.

>>> from collspec.models.generators import generate
>>> from collspec.models.msccl import to_xml  # loaded on first use
>>> program = loads(to_xml(generate("ring", "allreduce", 4)))
>>> verdict = verify(program)
>>> verdict.ok, program.threadblocks, program.steps
(True, 4, 28)
"""

from .parse import MscclFormatError, load, loads
from .verify import Verdict, verify

__all__ = ["load", "loads", "verify", "to_xml", "Verdict", "MscclFormatError", "ExportError"]


def __getattr__(name: str):
    """``to_xml`` and ``ExportError`` on first use: the writer pulls in
    xml.sax.saxutils (and urllib with it), which checking a file never needs."""
    if name in ("to_xml", "ExportError"):
        from . import export

        return getattr(export, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
