"""Shared test set-up: hypothesis profiles and registry isolation.

Profiles: ``ci`` (default, >= 2,000 examples per property), ``dev`` (fast), ``deep``
(100,000 examples; run with
``HYPOTHESIS_PROFILE=deep pytest tests/layout/test_wire.py tests/adversarial/test_hardening.py``).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=2000, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=100_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (720p clips, long prompts) run only with ``-m slow`` or ``MM_HANDOFF_SLOW=1``."""
    import pytest

    from mm_handoff._env import SLOW, env_flag

    expr = config.getoption("-m") or ""
    if env_flag(SLOW) or ("slow" in expr and "not slow" not in expr):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or MM_HANDOFF_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
