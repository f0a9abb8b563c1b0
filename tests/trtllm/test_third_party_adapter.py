"""A third-party adapter, registered only through the ``mm_handoff.adapters`` entry-point group, runs
through the glue against the stand-in: the glue uses nothing but the adapter protocol.

The plugin is a module plus a ``*.dist-info/entry_points.txt`` on ``sys.path`` (what ``pip install``
of a plugin distribution leaves behind), in a fresh interpreter with the built-in families blocked
(``MM_HANDOFF_BLOCK_ADAPTERS=builtin``), so every adapter call goes to the plugin. Its adapter
implements only the abstract methods, and its factory has the documented signature (no
``convention``).
"""

import json
import os
import textwrap

from trtllm_helpers import REPO, STAND_IN_DIR, run_python

PLUGIN = textwrap.dedent("""
    from mm_handoff.adapters.base import Adapter
    from mm_handoff.layout import derive_layout
    from mm_handoff.layout.mrope import mrope_positions
    from mm_handoff.layout.spec import PAD_ONLY, TimestampVocab, TokenSpec

    # the stand-in tokenizer's ids: specials as in Qwen3-VL, characters at 1000 + ord(c), " seconds" 6486
    SPEC = TokenSpec(image_pad=151655, video_pad=151656, vision_start=151652, vision_end=151653,
                     timestamps=TimestampVocab(open=1060, close=1062, dot=1046, seconds=6486,
                                               digits=range(1048, 1058)))
    CALLS = []


    class ToyAdapter(Adapter):
        family = "toy_vl"
        spec = SPEC
        convention = PAD_ONLY
        deepstack_levels = 0
        hidden_size = None

        def derive_layout(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, mrope=True,
                          limits=None, request_id=None):
            CALLS.append("derive_layout")
            return derive_layout(token_ids, SPEC, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                 family=self.family, convention=self.convention, mrope=mrope,
                                 tokenizer_digest=self.tokenizer_digest, limits=limits, request_id=request_id)

        def rebuild_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                              video_metadata=None, limits=None, request_id=None):
            return self.stock_token_ids(prompt_token_ids, image_grid_thw=image_grid_thw,
                                        video_grid_thw=video_grid_thw, limits=limits)

        def mrope_positions(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                        request_id=None):
            return mrope_positions(token_ids, SPEC, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                               limits=limits)


    def factory(*, tokenizer=None, config=None):
        CALLS.append("factory")
        return ToyAdapter()


    def register(registry):
        registry.register(["toy_vl", "tensorrt_llm._torch.models.modeling_qwen3vl:Qwen3VLInputProcessorBase"],
                          factory)
""")

ENTRY_POINTS = "[mm_handoff.adapters]\ntoy = toy_mm_adapter:register\n"

SCRIPT = textwrap.dedent("""
    import json
    import mm_handoff
    import mm_handoff.trtllm as glue
    import stand_in_helpers as H
    import toy_mm_adapter
    from mm_handoff.errors import AdapterError, AdapterNotFoundError
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm.llmapi.llm import LLM
    from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder
    from tensorrt_llm.sampling_params import SamplingParams
    from trtllm_helpers import PROMPT, video_request

    report = {}
    try:
        mm_handoff.get_adapter("qwen3_vl")
        report["builtin"] = "loaded"
    except AdapterNotFoundError:
        report["builtin"] = "blocked"
    glue.install(policy="raise")
    config, tok = H.make_qwen3vl_config(), H.FakeTokenizer()
    register_pretrained_config("toy", config)
    encoder, pd, agg = (MultimodalEncoder(model="toy", tokenizer=tok), LLM(model="toy", tokenizer=tok),
                        LLM(model="toy", tokenizer=tok))
    encoder.input_processor._hf_expand = H.make_hf_expand(tok, config)
    agg.input_processor._hf_expand = H.make_hf_expand(tok, config)
    sp = SamplingParams(max_tokens=4)
    enc = encoder.generate_async(video_request()).result()
    dp = enc.disaggregated_params
    dp.request_type = "context_and_generation"
    report["stamped_family"] = dp.multimodal_embedding_handles[0][glue.GRIDS_KEY]["family"]
    out = pd.generate_async({"prompt": PROMPT}, sampling_params=sp, disaggregated_params=dp).result()
    ref = agg.generate_async(video_request(), sampling_params=sp).result()
    report["pd_prompt_is_encoder_prompt"] = out.prompt_token_ids == list(enc.prompt_token_ids)
    report["tokens_equal_aggregated"] = out.outputs[0].token_ids == ref.outputs[0].token_ids
    report["calls"] = sorted(set(toy_mm_adapter.CALLS))

    def broken(self, layout, prompt_token_ids, *, request_id=None):
        raise TypeError("plugin bug")

    toy_mm_adapter.ToyAdapter.check_prompt = broken  # a third-party bug at the prefill point
    dp.disagg_request_id = 77
    try:
        pd._preprocess({"prompt": PROMPT}, sp, dp)
        report["broken"] = "passed"
    except AdapterError as exc:
        report["broken"] = [exc.field, exc.request_id, type(exc.__cause__).__name__]
    glue.uninstall()
    glue.install(policy="fallback")
    report["broken_fallback_prompt_len"] = len(pd._preprocess({"prompt": PROMPT}, sp, dp)[0])
    report["encoder_prompt_len"] = len(enc.prompt_token_ids)
    for llm in (encoder, pd, agg):
        llm.shutdown()
    print(json.dumps(report))
""")


def test_entry_point_adapter_runs_through_the_glue(tmp_path):
    """Built-ins blocked, the plugin's adapter stamps the encoder output, the PD side accepts it (tokens
    equal the aggregated path), and the plugin's own bug surfaces as an AdapterError naming the request
    (policy raise) or falls back to the stock prompt (policy fallback)."""
    (tmp_path / "toy_mm_adapter.py").write_text(PLUGIN)
    dist = tmp_path / "toy_mm_adapter-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-mm-adapter\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    path = os.pathsep.join([str(STAND_IN_DIR), str(REPO / "tests"), str(tmp_path)])
    proc = run_python(SCRIPT, env={"PYTHONPATH": path, "MM_HANDOFF_BLOCK_ADAPTERS": "builtin",
                                   "TLLM_WORKER_USE_SINGLE_PROCESS": "1"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["builtin"] == "blocked" and report["stamped_family"] == "toy_vl"
    assert report["pd_prompt_is_encoder_prompt"] and report["tokens_equal_aggregated"]
    assert report["calls"] == ["derive_layout", "factory"]
    assert report["broken"] == ["adapter.check_prompt", 77, "TypeError"]
    assert report["broken_fallback_prompt_len"] == report["encoder_prompt_len"] - 16  # 2 timestamps, 2 markers
