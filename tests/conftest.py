"""Shared test settings.

Hypothesis budgets are set here, in one place: the ``ci`` profile (the
default) keeps ``make test`` well under its 10-minute budget on 2 cores;
``HYPOTHESIS_PROFILE=thorough`` runs ten times as many examples.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False
)
settings.register_profile("thorough", max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
