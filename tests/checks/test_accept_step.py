"""The shared validator: each check, its typed error and the values it carries."""

import numpy as np
import pytest

from mm_handoff import (
    EmbeddingCountError,
    HandoffError,
    MropeLengthError,
    SkewError,
    TokenMismatchError,
    accept_layout,
    check_mrope_slice,
    get_adapter,
    validate,
)
from mm_handoff.errors import FingerprintMismatchError, GridMismatchError

RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]
META = {"fps": 24.0, "frames_indices": list(range(16)), "total_num_frames": 16}
GRID = [[8, 14, 14]]


@pytest.fixture(scope="module")
def pair():
    a = get_adapter("qwen3_vl")
    agg = a.derive_layout(a.rebuild_token_ids(RAW, video_grid_thw=GRID, video_metadata=[META]), video_grid_thw=GRID)
    stock = a.derive_layout(a.stock_token_ids(RAW, video_grid_thw=GRID), video_grid_thw=GRID, mrope=False)
    return agg, stock


def test_stock_shape_with_aggregated_mrope_is_caught(pair):
    """The bug: single-run prompt + the encoder's longer mRoPE ids -> MropeLengthError."""
    agg, stock = pair
    assert agg.prompt_len == 470 and stock.prompt_len == 406
    with pytest.raises(MropeLengthError) as info:
        validate(stock, mrope_position_ids=agg.mrope_position_ids, request_id="r-1")
    err = info.value
    assert (err.request_id, err.field, err.actual) == ("r-1", "mrope_position_ids.shape[-1]", 470)
    assert "406" in str(err) and "rebuilt the prompt from text" in str(err)


def test_stock_shape_alone_fails_the_grid_check(pair):
    _, stock = pair
    with pytest.raises(GridMismatchError) as info:
        validate(stock)
    assert info.value.expected == "8 runs for grid (8, 14, 14)" and info.value.actual == 1


def test_aggregated_layout_passes_every_check(pair):
    agg, _ = pair
    assert validate(agg, prompt_token_ids=agg.token_ids.tolist(), mrope_position_ids=agg.mrope_position_ids,
                    embedding_rows=392, fingerprint=agg.fingerprint(include_mrope=False)) is agg
    validate(agg, embedding_rows=[392])


def test_embedding_rows(pair):
    agg, _ = pair
    with pytest.raises(EmbeddingCountError) as info:
        validate(agg, embedding_rows=391)
    assert info.value.actual == 391
    with pytest.raises(EmbeddingCountError):
        validate(agg, embedding_rows=[390, 2])


def test_fingerprint_and_token_ids(pair):
    agg, stock = pair
    with pytest.raises(FingerprintMismatchError):
        validate(agg, fingerprint=stock.fingerprint())
    with pytest.raises(MropeLengthError):  # the layout's own mRoPE ids no longer fit: checked first
        validate(agg, prompt_token_ids=stock.token_ids.tolist())
    with pytest.raises(TokenMismatchError) as info:
        validate(agg.without_mrope(), prompt_token_ids=stock.token_ids.tolist())
    err = info.value
    assert err.index == 4  # first difference: timestamp text where the stock prompt has a pad
    assert err.expected_context == [872, 198, 151652, 27, 15, 13, 15] and err.actual_context[3] == 151656
    assert "first difference at index 4" in str(err)


@pytest.mark.parametrize("shape", [[3, 470], [3, 1, 470], (3, 1, 470)])
def test_check_mrope_slice_accepts_shapes(shape):
    assert check_mrope_slice(shape, 470) == 470
    assert check_mrope_slice(np.zeros(shape, dtype=np.int64), 470, begin=10, end=470) == 470


@pytest.mark.parametrize("shape, prompt_len, begin, end", [
    ([3, 470], 406, 0, None), ([3, 1, 406], 470, 0, None), ([2, 470], 470, 0, None),
    ([3, 2, 470], 470, 0, None), ([3, 470], 470, 20, 10), ([3, 470], 470, 0, 471), ("abc", 3, 0, None),
])
def test_check_mrope_slice_rejects(shape, prompt_len, begin, end):
    with pytest.raises(MropeLengthError) as info:
        check_mrope_slice(shape, prompt_len, begin=begin, end=end, request_id=9)
    assert info.value.request_id == 9


def test_validate_with_this_sides_adapter_is_the_accept_step(pair):
    """``validate(layout, adapter)`` is ``accept_layout`` on a decoded layout: the same checks, in the same
    order, with the same arguments (an un-expanded prompt re-expands; skew is checked)."""
    agg, _ = pair
    adapter = get_adapter("qwen3_vl")
    raw = np.asarray(RAW)
    assert validate(agg, adapter, prompt_token_ids=raw, embedding_rows=[392]) is agg
    assert accept_layout(agg.to_wire(), adapter, prompt_token_ids=raw, embedding_rows=[392]) == agg
    with pytest.raises(TokenMismatchError):  # without an adapter the prompt must be the expanded ids
        validate(agg.without_mrope(), prompt_token_ids=raw)
    with pytest.raises(SkewError):
        validate(agg, get_adapter("qwen3_5"))
    with pytest.raises(HandoffError) as info:
        validate(agg, adapter, embedding_rows=392, embedding_shapes=[(392, adapter.handle_row_width)])
    assert info.value.field == "embeddings"


def test_the_stock_layout_fails_the_accept_step_at_the_mrope_slice_first(pair):
    """mRoPE comes first in the one order, so the stock layout with the encoder's mRoPE ids is named as the
    silent slice of #20138, not as a grid mismatch, whichever entry point checks it."""
    agg, stock = pair
    adapter = get_adapter("qwen3_vl")
    for check in (lambda: validate(stock, adapter, mrope_position_ids=agg.mrope_position_ids, embedding_rows=392),
                  lambda: accept_layout(stock, adapter, mrope_position_ids=agg.mrope_position_ids)):
        with pytest.raises(MropeLengthError):
            check()


def test_a_prompt_longer_than_its_layout_names_the_layout_not_the_limits():
    """An un-expanded prompt is never longer than its expansion: one that is is not this layout's prompt, and
    the error says so (raising the limits would not help)."""
    from mm_handoff import get_adapter
    from mm_handoff.errors import HandoffError

    adapter = get_adapter("qwen3_vl", convention="pad_only")
    s = adapter.spec
    raw = [198, s.vision_start, s.image_pad, s.vision_end]
    layout = adapter.derive_layout(adapter.rebuild_token_ids(raw, image_grid_thw=[[1, 2, 2]]),
                                   image_grid_thw=[[1, 2, 2]])
    try:
        adapter.check_prompt(layout, raw + [100] * (layout.prompt_len + 5), request_id="r7")
    except HandoffError as exc:
        assert "limits" not in str(exc) and "not the one the encoder expanded" in str(exc)
        assert exc.request_id == "r7"
    else:
        raise AssertionError("a prompt longer than its layout was accepted")


def test_errors_name_what_failed_embeddings_and_equal_length_text():
    """A fractional embedding shape is an embedding error (not the mRoPE one); a text mismatch of equal length
    says where the ids differ instead of 'expected 2 ids, got 2 ids'."""
    from mm_handoff import accept_layout, get_adapter
    from mm_handoff.errors import EmbeddingCountError, TokenMismatchError

    a = get_adapter("qwen3_vl")
    s = a.spec
    raw = [198, s.vision_start, s.video_pad, s.vision_end]
    meta = [{"fps": 30.0, "frames_indices": [0, 1, 2, 3]}]
    layout = a.derive_layout(a.rebuild_token_ids(raw, video_grid_thw=[[2, 2, 2]], video_metadata=meta),
                             video_grid_thw=[[2, 2, 2]])
    for shape in ((4.9, 16384), (2, 16384.5), ("2", 16384)):
        try:
            accept_layout(layout.to_wire(), a, embedding_shapes=[shape])
        except EmbeddingCountError as exc:
            assert exc.field == "embedding_shapes[0].shape"
        else:
            raise AssertionError(f"{shape} was accepted")
    try:
        a.check_prompt(layout, [100, s.vision_start, s.video_pad, s.vision_end])
    except TokenMismatchError as exc:
        assert exc.expected != exc.actual and "index 0" in str(exc)
    else:
        raise AssertionError("another text was accepted")
