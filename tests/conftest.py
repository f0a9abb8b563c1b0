"""Shared test set-up: hypothesis profiles and registry isolation.

Profiles: ``ci`` (default, >= 2,000 examples per property), ``dev`` (fast: 100, a property's own higher
count lowered to it), ``deep`` (100,000 examples; run with
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
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def _cap_examples(items, cap: int) -> None:
    """Under the ``dev`` profile, a property's own ``@settings(max_examples=N)`` above the profile's count is lowered
    to it (a test's explicit settings otherwise win over any profile). ``make test``'s second pass (``python -O``)
    runs in this profile: its examples were drawn in full, ``ci`` profile and each test's own count, in the first."""
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if getattr(test, "hypothesis", None) is not None and own is not None and own.max_examples > cap:
            test._hypothesis_internal_use_settings = settings(own, max_examples=cap)


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (720p clips, long prompts) run only with ``-m slow`` or ``MM_HANDOFF_SLOW=1``; under the
    ``dev`` profile no property draws more than its examples (``_cap_examples``)."""
    import pytest

    from mm_handoff._env import SLOW, env_flag

    if PROFILE == "dev":
        _cap_examples(items, settings.get_profile("dev").max_examples)
    expr = config.getoption("-m") or ""
    if env_flag(SLOW) or ("slow" in expr and "not slow" not in expr):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or MM_HANDOFF_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
