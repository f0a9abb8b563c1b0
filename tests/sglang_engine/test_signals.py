"""SGLang's two check points count what they decided (mm_handoff.stats() and the Prometheus registry of the
process): ``admission`` (get_validated_mm_data) and ``ingress`` (the tokenizer path's receiver)."""

from __future__ import annotations

import asyncio
import types

import pytest
from sglang_engine.helpers import epd_request, no_timestamps

import mm_handoff
import mm_handoff.sglang as glue
from mm_handoff.errors import GridMismatchError, TokenMismatchError
from mm_handoff.glue.signals import SIGNALS

prometheus_client = pytest.importorskip("prometheus_client")


@pytest.fixture(autouse=True)
def fresh_signals():
    SIGNALS.reset()
    yield
    glue.uninstall()


def _counts():
    return {(r["family"], r["check_point"], r["outcome"]): r["count"] for r in mm_handoff.stats()["checks"]
            if r["engine"] == "sglang"}


def _sample(name, **labels):
    return prometheus_client.REGISTRY.get_sample_value(name, {"engine": "sglang", **labels}) or 0.0


def test_admission_counts_accepted_refused_and_rebuilt(sglang_processor):
    proc = sglang_processor[0]
    epd, adapter, _ = epd_request(sglang_processor)
    family = adapter.family
    before = {o: _sample("mm_handoff_checks_total", family=family, check_point="admission", outcome=o)
              for o in ("accepted", "refused", "rebuilt")}
    refusals = _sample("mm_handoff_refusals_total", check_point="admission", error="TokenMismatchError")
    glue.install()
    proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **epd.kwargs(carry_layout=True))
    with pytest.raises(TokenMismatchError):
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                                   **no_timestamps(epd, **{glue.LAYOUT_KWARG: epd.layout.to_wire()}))
    glue.uninstall()
    glue.install(policy="rebuild")
    proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                               **no_timestamps(epd, **{glue.LAYOUT_KWARG: epd.layout.to_wire()}))
    assert _counts() == {(family, "admission", "accepted"): 1, (family, "admission", "refused"): 1,
                         (family, "admission", "rebuilt"): 1}
    assert {o: _sample("mm_handoff_checks_total", family=family, check_point="admission", outcome=o) - before[o]
            for o in before} == {"accepted": 1, "refused": 1, "rebuilt": 1}
    assert _sample("mm_handoff_refusals_total", check_point="admission", error="TokenMismatchError") == refusals + 1


def test_the_receiver_counts_at_ingress_and_a_refusal_once(sglang_processor):
    """The tokenizer path: the receiver (ingress) passes the layout down; a refusal decided at admission is
    counted there only, though the receiver raises it to the request."""
    from mm_handoff.glue.policy import Policy
    from mm_handoff.sglang._hooks import HOOKS

    proc = sglang_processor[0]
    epd, adapter, _ = epd_request(sglang_processor)
    request = types.SimpleNamespace(rid="req-9", mm_processor_kwargs={})
    glue.attach_layout(request, epd.layout)

    async def own_recv(request_obj, mm_processor, prompt, **kwargs):  # SGLang's receive, at its core
        return mm_processor.get_validated_mm_data(prompt, epd.sglang_embeddings(), **kwargs)

    glue.install()
    receive = HOOKS[1].wrapper
    point = HOOKS[1].point("sglang", Policy.RAISE)
    asyncio.run(receive(own_recv, None, (request, proc, epd.prompt), epd.kwargs(), point=point))
    with pytest.raises((TokenMismatchError, GridMismatchError)) as err:
        asyncio.run(receive(own_recv, None, (request, proc, epd.prompt), no_timestamps(epd), point=point))
    assert err.value.request_id == "req-9"
    counts = _counts()
    assert counts[(adapter.family, "admission", "accepted")] == 1
    assert counts[(adapter.family, "admission", "refused")] == 1
    assert counts[("other", "ingress", "accepted")] == 1 and len(counts) == 3
    seconds = {r["check_point"]: r["count"] for r in mm_handoff.stats()["hook_seconds"] if r["engine"] == "sglang"}
    assert seconds == {"admission": 2, "ingress": 2}
