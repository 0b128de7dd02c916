"""collspec.conformance: the spec's checks run against real backends."""
