"""collspec.conformance: the spec's checks run against real backends.

``collspec conform --backend B --world-size N`` starts N rank processes, has
each call backend B's collectives on buffers built for the purpose, and
judges every rank's buffers against :mod:`collspec.spec`. The parts, in the
order a case flows through them:

==================  ===========================================================
module              job
==================  ===========================================================
:mod:`.resolve`     ``--backend`` to a class (built-ins, ``PATH.py:NAME``,
                    ``module:NAME``, the algorithms of ``collspec.impl``)
:mod:`.cases`       which calls to make: collectives x dtypes x ops x sizes x
                    in-place modes x roots; ``--quick``, default, ``--full``
:mod:`.collectives` one small description per collective (method, buffer
                    layout, expected result via the spec)
:mod:`.data`        the inputs: exact integer-mantissa patterns, rank-encoded
                    sums that decode into missing or doubled contributors
:mod:`.buffers`     each rank's guarded buffers, before the call
:mod:`.launch`      local (zygote + fork), ``mpiexec``, ``torchrun``
:mod:`.mpi_libs`    Open MPI, MPICH, Intel MPI: installs, their mpiexec, their
                    algorithms (``--algorithm``, ``--list-algorithms``)
:mod:`.rank`        one rank: set up torch.distributed, run the cases
:mod:`.runner`      the coordinator: follow the ranks, time out, restart
:mod:`.checks`      judge one case: violations with kind and location
:mod:`.conform`     options to a report; :mod:`.output`, :mod:`.junit`,
                    :mod:`.matrix` present it
:mod:`.bench`       algbw and busbw, nccl-tests style
==================  ===========================================================

The plug-in protocol (contracts.md), as :mod:`.collectives` routes the cases:
``reduce_scatter(output, input, op)`` and ``all_gather(output, input)`` only
ever get equal blocks (input = N x output for reduce-scatter, the reverse for
all-gather), as NCCL, torch.distributed and MPI define them. A count N does
not divide is cut into blocks in rank order, the first ``count % N`` ranks
one element more, and goes to the optional ``reduce_scatter_v(output, input,
op)`` / ``all_gather_v(output, input)``; each rank sees its own block as its
buffer's length. A class without the ``_v`` method has those cases ``n/a``
(not applicable): never a pass, never a failure, shown in the table, the
JSON report (``not_applicable``), the JUnit file (skipped, with the reason)
and the capability matrix (``=``: equal blocks pass; ``∅``). A class written
for the older text, whose ``reduce_scatter`` also took unequal blocks, keeps
working: its unequal cases become ``n/a`` until it adds
``reduce_scatter_v = reduce_scatter``. An exception other than
NotImplementedError or TypeError fails its case (``crash``, with the
exception and the ranks that raised) and the run goes on.

Decisions the contracts left open:

- **unsupported** is a ``warning``: a backend may lack what its library lacks
  (gloo has no integer avg) and still conform. It is never a pass: it has its
  own status and symbol in the capability matrix and the JUnit report marks
  it skipped; and a run in which nothing passed at all fails.
- **Hangs and crashes**: every case has a deadline (``--timeout``) counted
  from the end of the previous case. Past it, the ranks that did not finish
  are named (``hang``, or ``crash`` when a peer raised and left them
  waiting); a rank that dies is named with its exit code or signal
  (``crash``). Only then is every process of the run killed and the ranks
  restarted from the next case: always after a crash (every case gets a
  verdict), after at most :data:`~collspec.conformance.runner.MAX_RESTARTS`
  hangs (each costs ``--timeout``); cases after that are reported
  ``not-run`` with that reason. A backend that raised while every rank
  returned costs no restart: the run simply goes on.
- **Known findings**: a built-in backend that disagrees with the spec keeps
  the violation in the report, marked ``known`` with a warning severity
  (:mod:`.findings`); ``--strict`` counts it as an error.
- **Counts not divisible by N**: see :mod:`.cases`.
- **MPI algorithms**: each forced (collective, algorithm) is a start of the
  ranks of its own (the libraries read the choice at ``MPI_Init``), so a
  crash, a refusal or an ``MPI_Init`` abort stays that algorithm's and the
  sweep goes on with the next; every case id carries ``alg=NAME``.
"""
