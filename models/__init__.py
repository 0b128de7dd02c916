"""collspec.models: algorithms as data, one interpreter, the invariant checker and the cost model."""
