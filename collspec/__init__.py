"""collspec: formal specification and verification of collective operations.

Subpackages, in dependency order (each imports only those above it):

- :mod:`collspec.spec`: what each collective must compute (pure functions).
- :mod:`collspec.models`: algorithms as data, one interpreter, the checker,
  the cost model.
- :mod:`collspec.proofs`: Z3 proofs about the models' own index functions.
- :mod:`collspec.impl`: real executions of the schedules.
- :mod:`collspec.conformance`: the same checks against real backends.

The command line is :mod:`collspec.cli` (``collspec --help``).
"""

__version__ = "0.1.0"
