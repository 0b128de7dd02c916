"""collspec.impl: real executions of the models' schedules, with traces the
checker verifies.

A proof about a schedule says nothing about code that claims to run it. This
package runs the very schedules of :mod:`collspec.models` on torch tensors
and records what actually crossed each link, so the same invariants are
checked on what the code did.

==================  ==========================================================
module              what it does
==================  ==========================================================
:mod:`.cells`       cuts a buffer into a schedule's cells (near-equal split)
:mod:`.plan`        one rank's part of each step: messages, writes, snapshots
:mod:`.reduction`   the spec's ops on torch tensors, hop by hop, then finish
:mod:`.executor`    runs a schedule over torch.distributed isend/irecv
                    (gloo on CPU, nccl on GPU)
:mod:`.collectives` the torch collective API (in place and out of place) on
                    top of schedules
:mod:`.backends`    the built-in conformance backends: ``ring``,
                    ``recursive-doubling``, ``halving-doubling``,
                    ``binary-tree``, ``hierarchical-ring``, ``direct``, ``shm``
:mod:`.trace`       the recorder, and the check of merged traces against the
                    schedule and by the models checker
:mod:`.shm`         one-shot and two-shot all-reduce over shared memory
==================  ==========================================================

Typical use, in every rank process after ``torch.distributed`` is set up::

    from collspec.impl.backends import Ring
    from collspec.impl.trace import Recorder, check_traces, gather

    ring = Ring(rank, world_size, recorder=Recorder())
    ring.all_reduce(tensor, "sum")
    traces = gather(ring.recorder.traces)      # every rank's, on rank 0
    if traces is not None:
        print(check_traces(traces).violations)  # [] when the run was the schedule
"""
