"""Another request's layout, carried with this one, under every policy of the TensorRT-LLM glue.

Request A (its own text) arrives with request B's handoff: the same video, other text. In ``carry`` mode the
handles hold B's layout (with B's grids and metadata); in ``validate`` mode upstream's own carrier
(``DisaggregatedParams.multimodal_layout``) holds it. A layout that is not the request's own is not a
mismatch to repair: ``raise``, ``rebuild`` and ``fallback`` alike refuse it with a typed error (a rebuild
starts from this request's own prompt, grids and metadata, never from another request's layout; fallback
never passes it on), while A's own handoff is still served exactly. The vLLM and SGLang glue's test is
``tests/glue/test_foreign_layout.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

from adversary import answer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trtllm_helpers import video_request

import mm_handoff.trtllm as glue
from mm_handoff.layout import HandoffLayout
from mm_handoff.trtllm._carrier import embed_mask_cumsum, encoder_token_lengths

POLICIES = ("raise", "rebuild", "fallback")
TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz .,?", min_size=0, max_size=12)


def _prompt(before: str, after: str) -> str:
    return f"<|im_start|>user\n{before}<|vision_start|><|video_pad|><|vision_end|>{after}<|im_end|>\n"


@st.composite
def two_prompts(draw):
    """A's and B's prompts: the same video, other text."""
    a = (draw(TEXT), draw(TEXT))
    b = draw(st.tuples(TEXT, TEXT).filter(lambda b: b != a))
    return _prompt(*a), _prompt(*b)


def _sp():
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=2)


def _encoded(dep, prompt):
    out = dep.encoder.generate_async(video_request(prompt)).result()
    out.disaggregated_params.request_type = "context_and_generation"
    return out


def _refused(call):
    result, error = answer(call)
    assert error is not None, f"another request's layout passed: {str(result)[:200]}"
    assert error.field and len(str(error)) <= 1000
    return error


_SETTINGS = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(two_prompts(), st.sampled_from(POLICIES))
def test_carry_mode_refuses_another_requests_layout_under_every_policy(deployment, prompts, policy):
    """The prefill point: B's layout (and B's grids and metadata beside it) with A's prompt."""
    mine, theirs = prompts
    glue.uninstall()
    glue.install(policy=policy)
    dep = deployment()
    other = _encoded(dep, theirs)
    _refused(lambda: dep.pd._preprocess({"prompt": mine}, _sp(), other.disaggregated_params))
    own = _encoded(dep, mine)  # A's own handoff: served exactly under every policy
    assert dep.pd._preprocess({"prompt": mine}, _sp(), own.disaggregated_params)[0] == list(own.prompt_token_ids)


def _upstream_carrier(layout: HandoffLayout):
    """What upstream's encoder carries for ``layout`` (every field of the fork's dataclass)."""
    return SimpleNamespace(**layout.to_disagg_prefill_inputs(), encoder_token_lengths=encoder_token_lengths(layout),
                           multimodal_embed_mask_cumsum=embed_mask_cumsum(layout))


@_SETTINGS
@given(two_prompts(), st.sampled_from(POLICIES))
def test_validate_mode_refuses_another_requests_layout_under_every_policy(deployment, prompts, policy):
    """Admission: upstream's carrier holds B's layout (upstream's ``_preprocess`` runs the carried ids) while
    the request's own text is A's."""
    from mm_handoff.glue.checkpoint import CheckPoint
    from mm_handoff.glue.policy import Policy
    from mm_handoff.trtllm._admission import admission_wrapper

    mine, theirs = prompts
    glue.uninstall()
    glue.install(policy="raise")  # the encoder side; admission is called below with each policy
    dep = deployment()
    llm = SimpleNamespace(input_processor=dep.pd.input_processor)

    def admit(prompt, out):
        handles = out.disaggregated_params.multimodal_embedding_handles
        layout = HandoffLayout.from_wire(handles[0][glue.LAYOUT_KEY])
        params = SimpleNamespace(multimodal_layout=_upstream_carrier(layout), multimodal_embedding_handles=handles,
                                 mrope_position_ids_handle=None, disagg_request_id="A")
        result = (layout.token_ids.tolist(),)  # upstream takes the prompt from its carrier
        return result, lambda: admission_wrapper(lambda *a, **k: result, llm, ({"prompt": prompt}, None, params),
                                                 {}, point=CheckPoint("trtllm", "admission", Policy(policy)))

    _, call = admit(mine, _encoded(dep, theirs))
    error = _refused(call)
    assert error.request_id == "A"
    result, call = admit(mine, _encoded(dep, mine))
    assert call() is result
