"""The adapter protocol: a minimal third-party adapter works end to end; adapter failures are typed."""

import numpy as np
import pytest

import mm_handoff
from mm_handoff import accept_layout
from mm_handoff.adapters import detect_convention
from mm_handoff.adapters.base import Adapter
from mm_handoff.adapters.registry import AdapterRegistry, build_adapter
from mm_handoff.errors import AdapterError, AdapterRegistrationError, GridMismatchError, SkewError, TokenMismatchError
from mm_handoff.layout import derive_layout
from mm_handoff.layout.mrope import mrope_positions
from mm_handoff.layout.spec import PAD_ONLY, REPLACE_WRAPPER, TokenSpec

SPEC = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4)


class MinimalAdapter(Adapter):
    """Implements only the abstract methods, the way a third party would."""

    family = "toy"
    spec = SPEC
    convention = PAD_ONLY
    deepstack_levels = 0
    hidden_size = 8

    def derive_layout(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, mrope=True, limits=None,
                      request_id=None):
        return derive_layout(token_ids, SPEC, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                             family=self.family, convention=self.convention, mrope=mrope,
                             tokenizer_digest=self.tokenizer_digest, limits=limits, request_id=request_id)

    def rebuild_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                          video_metadata=None, limits=None, request_id=None):
        return self.stock_token_ids(prompt_token_ids, image_grid_thw=image_grid_thw, limits=limits)

    def mrope_positions(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                        request_id=None):
        return mrope_positions(token_ids, SPEC, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                               limits=limits)


def documented_factory(*, tokenizer=None, config=None):  # the signature the registry documents
    return MinimalAdapter()


RAW = [1, 2, SPEC.vision_start, SPEC.image_pad, SPEC.vision_end, 7, 8]
GRID = [[1, 2, 4]]


def test_minimal_adapter_through_registry_and_accept_step():
    """A factory without convention=, asked for a convention it has, builds; the layout round-trips
    through accept_layout with the default check_prompt."""
    reg = AdapterRegistry(load_entry_points=False)
    reg.register("toy", documented_factory)
    adapter = reg.get("toy", convention=PAD_ONLY)
    layout = adapter.rebuild_layout(RAW, image_grid_thw=GRID)
    assert layout.prompt_len == len(RAW) + 1
    got = accept_layout(layout.to_wire(), adapter, embedding_shapes=[(2, 8)], prompt_token_ids=RAW,
                        mrope_position_ids=(3, layout.prompt_len), request_id="r")
    assert got == layout
    with pytest.raises(AdapterError) as info:  # a convention the factory cannot give is not silently ignored
        reg.get("toy", convention=REPLACE_WRAPPER)
    assert info.value.field == "adapter.convention"


def test_default_check_prompt_catches_another_prompt():
    adapter = MinimalAdapter()
    layout = adapter.rebuild_layout(RAW, image_grid_thw=GRID)
    with pytest.raises(TokenMismatchError):
        adapter.check_prompt(layout, [9] + RAW[1:])
    with pytest.raises(TokenMismatchError):
        adapter.check_prompt(layout, RAW[:-1] + [9])
    with pytest.raises(GridMismatchError):
        adapter.check_prompt(layout, [1, 2, 7, 8])


def test_accept_step_checks_each_part_in_order():
    adapter = MinimalAdapter()
    layout = adapter.rebuild_layout(RAW, image_grid_thw=GRID)
    wire = layout.to_wire()
    cases = [
        (dict(embedding_shapes=[(2, 8), (2, 8)]), "embeddings"),
        (dict(embedding_shapes=[(3, 8)]), "embedding_rows"),
        (dict(embedding_shapes=[(2, 9)]), "embeddings[0].shape[1]"),
        (dict(embeddings=[np.zeros((2, 8))], embedding_shapes=[(2, 8)]), "embeddings"),
        (dict(prompt_token_ids=[9] + RAW[1:]), "prompt text before the first item"),
        (dict(mrope_position_ids=(3, layout.prompt_len - 1)), "mrope_position_ids.shape[-1]"),
    ]
    for kwargs, field in cases:
        with pytest.raises(mm_handoff.HandoffError) as info:
            accept_layout(wire, adapter, request_id="r", **kwargs)
        assert info.value.field == field and info.value.request_id == "r", (kwargs, info.value)
    other = MinimalAdapter()
    other.family = "other"
    with pytest.raises(SkewError):
        accept_layout(wire, other)


class BrokenAdapter(MinimalAdapter):
    def check_prompt(self, layout, prompt_token_ids, *, request_id=None):
        raise TypeError("third-party bug")

    @property
    def handle_row_width(self):
        raise AttributeError("no width")


def test_adapter_failures_become_adapter_errors():
    """An untyped failure inside an adapter reaches the caller as an AdapterError (a HandoffError)."""
    layout = MinimalAdapter().rebuild_layout(RAW, image_grid_thw=GRID)
    with pytest.raises(AdapterError) as info:
        accept_layout(layout, BrokenAdapter(), prompt_token_ids=RAW, request_id="r")
    assert info.value.field == "adapter.check_prompt" and "third-party bug" in str(info.value)
    assert isinstance(info.value.__cause__, TypeError)
    with pytest.raises(AdapterError) as info:
        accept_layout(layout, BrokenAdapter(), embedding_shapes=[(2, 8)])
    assert info.value.field == "adapter.handle_row_width"

    def exploding_factory(*, tokenizer=None, config=None):
        raise KeyError("config field")

    with pytest.raises(AdapterError) as info:
        build_adapter(exploding_factory, request_id="r")
    assert info.value.field == "adapter factory" and isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize("keys, factory", [([], documented_factory), (["toy"], 42), ([""], documented_factory),
                                           ([3], documented_factory), (7, documented_factory)])
def test_registry_misuse_is_a_registration_error(keys, factory):
    """No keys, a non-callable factory or a non-key are usage errors, not "not found"/"already registered"."""
    with pytest.raises(AdapterRegistrationError) as info:
        AdapterRegistry(load_entry_points=False).register(keys, factory)
    assert isinstance(info.value, TypeError) and isinstance(info.value, AdapterError)


@pytest.mark.parametrize("installed, expected", [("5.9.0", REPLACE_WRAPPER), ("5.10.0", REPLACE_WRAPPER),
                                                 ("5.10.1", PAD_ONLY), ("5.10.1rc1", PAD_ONLY),
                                                 ("5.23.0", PAD_ONLY), ("6.0.0.dev0", PAD_ONLY)])
def test_detect_convention_threshold(monkeypatch, installed, expected):
    """5.10.1 is the first release that keeps the outer markers (5.10.0 was yanked)."""
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed)
    assert detect_convention() == expected
