"""Each test starts with mm-handoff's figures at zero and full event buckets (the events are rate-limited
per process: one test's refusals must not silence the next test's)."""

import pytest

from mm_handoff.glue.signals import SIGNALS


@pytest.fixture(autouse=True)
def fresh_signals():
    SIGNALS.reset()
    yield SIGNALS
