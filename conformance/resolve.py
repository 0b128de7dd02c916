"""From ``--backend`` to the class every rank instantiates.

``--backend`` is a built-in name (:data:`BUILTIN`) or ``PATH.py:NAME`` or
``module:NAME``. :func:`parse` checks it without running any of the user's
code (the file or module exists and defines NAME at top level), so a typo is
a one-line error before any process starts; :func:`load` imports it, in the
rank processes. The algorithm names come from ``collspec.impl.backends``,
resolved lazily through the same table: until that module defines the class,
the name is "not available" (exit 2).

>>> parse("gloo").target, parse("gloo").device
('collspec.conformance.torch_backend:Gloo', 'cpu')
>>> parse("nosuch.py:X")
Traceback (most recent call last):
...
collspec.spec.errors.CollspecError: --backend nosuch.py:X: no such file nosuch.py
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass

from ..spec.errors import CollspecError

#: Built-in backend names and the classes they stand for.
BUILTIN: dict[str, str] = {
    "reference": "collspec.conformance.reference:Reference",
    "gloo": "collspec.conformance.torch_backend:Gloo",
    "nccl": "collspec.conformance.torch_backend:Nccl",
    "mpi": "collspec.conformance.mpi_backend:Mpi",
    "openmpi": "collspec.conformance.mpi_backend:Mpi",
    "mpich": "collspec.conformance.mpi_backend:Mpi",
    "intelmpi": "collspec.conformance.mpi_backend:Mpi",
    "ring": "collspec.impl.backends:Ring",
    "shm": "collspec.impl.backends:SharedMemory",
    "recursive-doubling": "collspec.impl.backends:RecursiveDoubling",
    "halving-doubling": "collspec.impl.backends:HalvingDoubling",
    "binary-tree": "collspec.impl.backends:BinaryTree",
    "hierarchical-ring": "collspec.impl.backends:HierarchicalRing",
    "nccl-ring": "collspec.impl.backends:NcclRing",
    "direct": "collspec.impl.backends:Direct",
}

#: Built-ins that need a launcher or device of their own.
LAUNCHER = {"mpi": "mpiexec", "openmpi": "mpiexec", "mpich": "mpiexec", "intelmpi": "mpiexec"}
#: The MPI library each MPI backend runs (:mod:`.mpi_libs`); ``mpi`` is Open MPI's alias.
LIBRARY = {"mpi": "openmpi", "openmpi": "openmpi", "mpich": "mpich", "intelmpi": "intelmpi"}
DEVICE = {"nccl": "cuda", "gloo": "cpu", "reference": "cpu"}
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class BackendSpec:
    """What ``--backend`` named: ``target`` is ``module:NAME`` or ``/abs/path.py:NAME``."""

    text: str
    target: str
    device: str = "cpu"
    launcher: str = "local"
    library: str | None = None  # the MPI library, for the MPI backends

    @property
    def name(self) -> str:
        """A short name for reports: the built-in name or the class name."""
        return self.text if self.text in BUILTIN else self.target.rpartition(":")[2]


def parse(text: str, device: str | None = None) -> BackendSpec:
    """Check ``--backend`` statically and say which class it means.

    ``device`` ("cpu": gloo process group, "cuda": nccl, one GPU per rank)
    defaults to the built-in's own (cuda for nccl) or cpu.
    """
    spec = _parse(text)
    if device is None or device == spec.device:
        return spec
    if device not in DEVICES:
        raise CollspecError(f"--device {device}: use one of {', '.join(DEVICES)}")
    if spec.text in DEVICE or spec.text in LAUNCHER:
        raise CollspecError(f"--backend {spec.text} runs on {spec.device} only; drop --device {device}")
    return BackendSpec(spec.text, spec.target, device, spec.launcher, spec.library)


def _parse(text: str) -> BackendSpec:
    text = (text or "").strip()
    if text in BUILTIN:
        target = BUILTIN[text]
        module, _, name = target.partition(":")
        if not module.startswith("collspec.conformance."):
            _require_defined(text, module, name, builtin=True)
        return BackendSpec(text, target, DEVICE.get(text, "cpu"), LAUNCHER.get(text, "local"), LIBRARY.get(text))
    where, colon, name = text.rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise CollspecError(
            f"--backend {text}: use a built-in name ({', '.join(BUILTIN)}) or PATH.py:NAME or module:NAME"
        )
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise CollspecError(f"--backend {text}: no such file {where}")
        path = os.path.abspath(where)
        _require_name(text, path, _source(text, path), name)
        return BackendSpec(text, f"{path}:{name}")
    _require_defined(text, where, name, builtin=False)
    return BackendSpec(text, f"{where}:{name}")


def load(target: str) -> type:
    """Import the class ``target`` names (in a rank process)."""
    where, _, name = target.rpartition(":")
    try:
        if where.endswith(".py"):
            sys.path.insert(0, os.path.dirname(where))  # so that it can import its neighbours
            name_in_sys = "collspec_backend_" + os.path.splitext(os.path.basename(where))[0]
            module_spec = importlib.util.spec_from_file_location(name_in_sys, where)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name_in_sys] = module  # dataclasses and pickle look classes up there
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except Exception as error:
        raise CollspecError(f"backend {target}: importing {where} failed: {type(error).__name__}: {error}") from error
    cls = getattr(module, name, None)
    if not callable(cls):
        raise CollspecError(f"backend {target}: {where} has no class {name}")
    return cls


def _require_defined(text: str, module: str, name: str, builtin: bool) -> None:
    # The ranks run with the working directory on sys.path (python -m), so look there too.
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    if found is None or not found.origin or not found.origin.endswith(".py"):
        if builtin:
            raise CollspecError(f"backend '{text}' is not available: {module} does not exist yet")
        if found is None:
            raise CollspecError(f"--backend {text}: no module named {module}")
        return  # an extension module: nothing to read, load() will tell
    if not _defines(_source(text, found.origin), name):
        if builtin:
            raise CollspecError(f"backend '{text}' is not available: {module} has no {name} yet")
        raise CollspecError(f"--backend {text}: {module} has no class {name}")


def _source(text: str, path: str) -> ast.Module:
    try:
        with open(path, encoding="utf-8") as handle:
            return ast.parse(handle.read(), filename=path)
    except SyntaxError as error:
        raise CollspecError(f"--backend {text}: {path} line {error.lineno}: syntax error: {error.msg}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CollspecError(f"--backend {text}: cannot read {path}: {error}") from None


def _require_name(text: str, path: str, tree: ast.Module, name: str) -> None:
    if not _defines(tree, name):
        raise CollspecError(f"--backend {text}: {os.path.basename(path)} has no class {name}")


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether a module binds ``name`` at top level (or may, through ``import *``)."""
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name or alias.name == "*" for alias in node.names):
                return True
    return False
