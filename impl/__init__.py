"""collspec.impl: real executions of the models' schedules, with traces the checker verifies."""
