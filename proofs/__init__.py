"""collspec.proofs: Z3 proofs about the models' own index functions and schedules."""
