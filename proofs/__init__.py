"""collspec.proofs: why the algorithms are right, machine-checked with Z3.

Tests say "it held for N = 2..64"; these say "it holds for every N >= 2"
where that can be shown, and for every input of a bounded size where not.

=========================  ==========================================================
module                     what it proves
=========================  ==========================================================
:mod:`.ring`               for all N >= 2, about the index functions the ring
                           generator calls (evaluated on Z3 integers, never a copy):
                           same index, no chunk twice over a link per phase, all
                           links busy for 2(N-1) hops, forwarding, the contributor
                           invariant (base and step as separate queries), the
                           all-gather, identical bits, traffic = the lower bound
:mod:`.induction`          for all N, every built-in algorithm: every output holds
                           every contribution exactly once, same-index reduces; one
                           induction over the transfer function the generator
                           enumerates, against the claims in :mod:`.invariants`
                           (rooted trees: at root 0, then every root as a renaming;
                           nccl-ring: its one-loop instance, 1 channel, chunk 1)
:mod:`.hierarchical`       the same for hierarchical-ring with the node count and
                           the group size both symbolic, on its coordinate function
:mod:`.schedules`          any schedule (a JSON file, an MSCCL program, a built-in
                           at one N) computes its collective for all inputs: THE
                           interpreter over Z3 variables vs the spec's definition
:mod:`.floating`           float16/bfloat16: the ring's result can differ from the
                           rank-order sum (a concrete, numpy-checked example), never
                           for two ranks, and every rank ends with the same bits
:mod:`.lower_bound`        no ring all-reduce in fewer than 2(N-1) steps; one in
                           2(N-1), checked by models.checker (bounded N, SCCL style)
:mod:`.suite`              the list ``collspec prove`` runs, with scopes
:mod:`.solver`             queries with resource limits, non-vacuity and scope checks,
                           counterexamples; ``unknown`` is never a pass
=========================  ==========================================================

The worked floating-point examples are in :mod:`collspec.spec.floating_point`.
"""
