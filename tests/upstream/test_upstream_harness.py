"""The harness cannot drift silently: a read it lacks is a named harness gap, never a glue failure."""

import re
from pathlib import Path

import pytest
from upstream import flows
from upstream.harness import HarnessGap, UpstreamArgs, harness_gap_in, llm_args_defaults

from mm_handoff.errors import HandoffError

LAYOUT_KEY = "mm_handoff.layout"


def _stamped(upstream, model):
    enc = flows.encoder(upstream, model.processor, model.config)
    return enc.generate_async(flows.video_inputs())


def test_a_read_the_harness_lacks_is_a_named_harness_gap(upstream, model, glue):
    """Upstream's ``_preprocess`` reads ``args.backend`` on the disaggregated branch; without it the harness
    names the attribute and the upstream line that read it (and that line really reads it)."""
    glue.install(policy="raise")
    out = _stamped(upstream, model)
    pd = flows.pd_llm(upstream, model.processor, model.config, args=UpstreamArgs(upstream.tree.root).without("backend"))
    with pytest.raises(HarnessGap) as info:
        pd._preprocess({"prompt": flows.PROMPT}, None, flows.pd_params(upstream, out))
    gap = info.value
    match = re.fullmatch(r"harness gap: args\.backend read at (tensorrt_llm/\S+\.py):(\d+)", str(gap))
    assert match, str(gap)
    line = Path(upstream.tree.root, match.group(1)).read_text().splitlines()[int(match.group(2)) - 1]
    assert "args.backend" in line, line
    assert harness_gap_in(gap) is gap


def test_a_glue_failure_is_not_a_harness_gap(upstream, model, glue):
    """A corrupted stamp under policy ``raise``: a typed HandoffError from the glue, no harness gap in it."""
    glue.install(policy="raise")
    out = _stamped(upstream, model)
    params = flows.pd_params(upstream, out)
    stamp = dict(params.multimodal_embedding_handles[0][LAYOUT_KEY])
    stamp.popitem()  # one field lost in transit
    params.multimodal_embedding_handles[0][LAYOUT_KEY] = stamp
    pd = flows.pd_llm(upstream, model.processor, model.config)
    with pytest.raises(HandoffError) as info:
        pd._preprocess({"prompt": flows.PROMPT}, None, params)
    assert harness_gap_in(info.value) is None


def test_an_upstream_object_names_a_missing_instance_attribute(upstream, model):
    """The LLM object too: an instance attribute ``__init__`` would have set is a named gap, while
    upstream's ``hasattr`` / ``getattr(..., default)`` still see an AttributeError."""
    pd = flows.pd_llm(upstream, model.processor, model.config)
    with pytest.raises(HarnessGap, match=r"harness gap: LLM\._llm_id read at "):
        pd._llm_id  # noqa: B018 - the read is the test
    assert getattr(pd, "_no_such_attribute", "default") == "default"
    assert getattr(UpstreamArgs(), "post_processor_hook", None) is None


def test_llm_args_defaults_come_from_the_trees_own_source(tmp_path):
    """With ``llm_args.py`` in the tree, its literal field defaults answer (the scenario values win)."""
    src = tmp_path / "tensorrt_llm" / "llmapi"
    src.mkdir(parents=True)
    (src / "llm_args.py").write_text(
        "class BaseLlmArgs:\n    stream_interval: int = Field(default=4)\n    backend: str = 'trt'\n"
        "class TorchLlmArgs(BaseLlmArgs):\n    encode_only: bool = Field(False, description='x')\n")
    assert llm_args_defaults(str(tmp_path)) == {"stream_interval": 4, "backend": "trt", "encode_only": False}
    args = UpstreamArgs(str(tmp_path))
    assert (args.stream_interval, args.encode_only, args.backend) == (4, False, "pytorch")
    with pytest.raises(HarnessGap, match="args.no_such_field"):
        args.no_such_field  # noqa: B018
