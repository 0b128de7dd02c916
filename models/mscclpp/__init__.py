"""MSCCL++ execution plans: import, a verifier with the executor's
concurrent semantics, and export of the built-in algorithms."""
