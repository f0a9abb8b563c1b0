"""The tokenizer path end to end through SGLang's own receiver (``MMReceiverBase.recv_mm_data``).

SGLang's receiver runs as in a ``--language-only`` server with ``--encoder-transfer-backend zmq_to_tokenizer``:
it binds its ZMQ socket, dispatches the encode request and receives the parts with ``_recv_mm_data``,
aggregates them (``MultiModalEmbeddingData``) and calls ``get_validated_mm_data``. Only the encoder is
stood in for: its dispatch (``encode``) sends the parts as SGLang's encoder server does
(``EmbeddingData`` pickled without its tensor, then the tensor's bytes, on a PUSH socket), with the
encoder's ``video_timestamps`` on the video part, or without them (a loader that gave no metadata).
The layout rides in the request's ``mm_processor_kwargs`` (:func:`mm_handoff.sglang.attach_layout`).
"""

from __future__ import annotations

import asyncio
import pickle
import types

import numpy as np
import pytest
from sglang_engine.helpers import epd_request

import mm_handoff.sglang as glue
from mm_handoff.errors import GridMismatchError, TokenMismatchError


def _receiver(parts):
    """SGLang's HTTP receiver, its encoder dispatch replaced by a sender of ``parts`` (no __init__: no server)."""
    import zmq
    import zmq.asyncio
    from sglang.srt.disaggregation.encoder.receiver import MMReceiverHTTP

    receiver = object.__new__(MMReceiverHTTP)
    receiver.encode_urls = ["http://encoder.invalid"]
    receiver.context = zmq.asyncio.Context()
    receiver.host = "127.0.0.1"
    receiver.recv_timeout = 30
    receiver.model_type = None

    async def encode(req_id, mm_data, embedding_port, endpoint, encode_urls=None):
        sock = receiver.context.socket(zmq.PUSH)
        sock.connect(f"tcp://127.0.0.1:{embedding_port}")
        for part in parts(req_id):
            await sock.send_multipart([pickle.dumps(part.copy_without_embedding()), part.embedding.numpy().tobytes()])
        sock.close(linger=1000)
        return None

    receiver.encode = encode
    return receiver


def _parts(epd, *, with_timestamps: bool):
    from sglang.srt.disaggregation.encoder.receiver import EmbeddingData
    from sglang.srt.managers.schedule_batch import Modality

    def build(req_id):
        extra = {"video_timestamps": epd.meta["video_timestamps"]} if with_timestamps else {}
        return [EmbeddingData(req_id, 2, 0, epd.meta["img_grid_thw"], Modality.IMAGE,
                              embedding=epd.embeddings["image"]),
                EmbeddingData(req_id, 2, 1, epd.meta["video_grid_thw"], Modality.VIDEO,
                              embedding=epd.embeddings["video"], **extra)]
    return build


def _receive(sglang_processor, epd, *, with_timestamps=True, carry=True):
    request = types.SimpleNamespace(rid="req-7", image_data=["http://img"], video_data=["http://vid"], audio_data=None,
                                    mm_content_hashes=None, mm_processor_kwargs={})
    if carry:
        glue.attach_layout(request, epd.layout)
    receiver = _receiver(_parts(epd, with_timestamps=with_timestamps))
    try:
        return asyncio.run(receiver.recv_mm_data(request, sglang_processor[0], epd.prompt)), request
    finally:
        receiver.context.term()


def test_the_request_carries_the_layout_through_sglangs_receiver(sglang_processor):
    epd, _, _ = epd_request(sglang_processor)
    plain, _ = _receive(sglang_processor, epd)  # not installed: SGLang's own result
    np.testing.assert_array_equal(plain.input_ids, epd.layout.token_ids)
    glue.install()
    out, request = _receive(sglang_processor, epd)
    np.testing.assert_array_equal(out.input_ids, epd.layout.token_ids)
    assert glue.carried_layout(request) == epd.layout.to_wire()


def test_the_silent_fallback_reaches_the_request_as_a_typed_error(sglang_processor):
    """Without timestamps SGLang's receiver returns the one-run prompt; installed, the request gets the error
    (SGLang's receive task would only log it and fall back to processing the media itself)."""
    epd, _, _ = epd_request(sglang_processor)
    silent, _ = _receive(sglang_processor, epd, with_timestamps=False)
    assert len(silent.input_ids) < epd.layout.prompt_len
    glue.install()
    with pytest.raises(TokenMismatchError) as err:
        _receive(sglang_processor, epd, with_timestamps=False)
    assert err.value.request_id == "req-7"
    with pytest.raises(GridMismatchError) as err:  # no layout carried: the stamping check
        _receive(sglang_processor, epd, with_timestamps=False, carry=False)
    assert err.value.field == "video_timestamps"
