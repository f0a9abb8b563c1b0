"""``prefill_request`` hands back what it checked, and only that: nothing a returned request holds is the caller's.

The PD request it builds (``PreprocessedInputs`` + a copied ``DisaggregatedParams``) once held the caller's
handle list, hashes and mRoPE handles: replacing a handle in the encoder output after the call changed the
accepted request (rows 8 -> 1, lengths still [8]). Here every container reachable from the caller's encoder
output is mutated after the call, one at a time, in every way a container can be, and the returned request
must not change; and no container of the returned objects is one of the caller's.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from trtllm_helpers import video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import HandoffError

_CONTAINERS = (list, dict, set, bytearray, np.ndarray)


def _encode(dep):
    out = dep.encoder.generate_async(video_request()).result()
    out.disaggregated_params.request_type = "context_and_generation"
    return out


def _children(obj):
    """What an object holds, as the test walks it (containers, dataclasses, plain objects)."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, (str, bytes, bytearray, int, float, complex, np.ndarray, type)) or obj is None:
        return []
    if dataclasses.is_dataclass(obj):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    out = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
    for cls in type(obj).__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            if hasattr(obj, name):
                out.append(getattr(obj, name))
    return out


def _reachable(root) -> list:
    """Every object reachable from ``root`` (each once)."""
    seen, out, todo = set(), [], [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append(obj)
        todo.extend(_children(obj))
    return out


def _plain(obj, memo=None):
    """A deep, comparable picture of ``obj`` (what the returned request says, whatever it is made of)."""
    memo = {} if memo is None else memo
    if id(obj) in memo:
        return ("<cycle>",)
    memo[id(obj)] = True
    try:
        if isinstance(obj, np.ndarray):
            return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
        if isinstance(obj, dict):
            return ("dict", tuple((repr(k), _plain(v, memo)) for k, v in obj.items()))
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__, tuple(_plain(v, memo) for v in obj))
        if isinstance(obj, (set, frozenset)):
            return (type(obj).__name__, tuple(sorted(repr(v) for v in obj)))
        if isinstance(obj, (str, bytes, bytearray, int, float, complex)) or obj is None:
            return (type(obj).__name__, bytes(obj) if isinstance(obj, bytearray) else obj)
        return (type(obj).__name__, tuple(_plain(v, memo) for v in _children(obj)))
    finally:
        del memo[id(obj)]


def _mutations(obj):
    """Every way to change a container in place (each a callable), none of which keeps it equal."""
    if isinstance(obj, list):
        out = [lambda o=obj: o.append("planted"), lambda o=obj: o.clear()]
        out += [lambda o=obj, i=i: o.__setitem__(i, "planted") for i in range(len(obj))]
        return out
    if isinstance(obj, dict):
        out = [lambda o=obj: o.__setitem__("planted", 1), lambda o=obj: o.clear()]
        out += [lambda o=obj, k=k: o.__setitem__(k, "planted") for k in list(obj)]
        return out
    if isinstance(obj, set):
        return [lambda o=obj: o.add("planted"), lambda o=obj: o.clear()]
    if isinstance(obj, bytearray):
        return [lambda o=obj: o.extend(b"planted"), lambda o=obj: o.clear()]
    if isinstance(obj, np.ndarray) and obj.flags.writeable and obj.size:
        return [lambda o=obj: o.reshape(-1).__setitem__(0, o.reshape(-1)[0] + 1)]
    return []


def _caller_side(enc):
    """The caller's containers: everything reachable from the encoder output's params and prompt."""
    roots = [enc.disaggregated_params, getattr(enc, "prompt_token_ids", None)]
    return [o for root in roots for o in _reachable(root) if isinstance(o, _CONTAINERS)]


def test_no_container_of_the_returned_request_is_the_callers(deployment):
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    req = glue.prefill_request(enc, processor=dep.pd.input_processor)
    caller = {id(o) for o in _caller_side(enc)}
    assert req.disaggregated_params is not enc.disaggregated_params
    shared = [type(o).__name__ for o in _reachable(req) if isinstance(o, _CONTAINERS) and id(o) in caller]
    assert not shared, f"the returned request holds {len(shared)} of the caller's containers: {shared[:8]}"


def test_every_mutation_of_every_caller_container_after_the_call_leaves_the_request_as_accepted(deployment):
    """Each container of the encoder output, each in-place change: the returned request stays as accepted."""
    glue.install()
    dep = deployment()
    template = _encode(dep)
    count = len([m for o in _caller_side(template) for m in _mutations(o)])
    assert count > 50  # the handles, their dicts and lists, the carried layout, grids, metadata, hashes, mRoPE
    for k in range(count):
        enc = copy.deepcopy(template)
        req = glue.prefill_request(enc, processor=dep.pd.input_processor)
        before = _plain(req)
        mutation = [m for o in _caller_side(enc) for m in _mutations(o)][k]
        mutation()
        assert _plain(req) == before, f"mutation {k} of the caller's encoder output changed the request"


def test_replacing_a_handle_after_the_call_does_not_change_the_accepted_rows(deployment):
    """The issue's case: the handle list replaced after the call (8 rows -> 1); the request keeps 8."""
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    req = glue.prefill_request(enc, processor=dep.pd.input_processor)
    handles = enc.disaggregated_params.multimodal_embedding_handles
    rows = handles[0]["tensor_size"][0]
    lengths = list(req.inputs.multimodal_params.multimodal_data["multimodal_embedding_lengths"])
    handles[0] = dict(handles[0], tensor_size=[1, handles[0]["tensor_size"][1]])
    for held in (req.inputs.multimodal_params.multimodal_data["multimodal_embedding"],
                 req.disaggregated_params.multimodal_embedding_handles):
        assert held[0]["tensor_size"][0] == rows == sum(lengths)


def test_a_params_object_that_is_no_dataclass_is_refused_not_shared(deployment):
    """A duck-typed params object cannot be copied field by field: refused, never handed back as it is."""
    from types import SimpleNamespace

    glue.install()
    dep = deployment()
    enc = _encode(dep)
    dp = enc.disaggregated_params
    enc.disaggregated_params = SimpleNamespace(**{f.name: getattr(dp, f.name) for f in dataclasses.fields(dp)})
    with pytest.raises(HandoffError) as info:
        glue.prefill_request(enc, processor=dep.pd.input_processor)
    assert info.value.field.startswith("encoder_output.disaggregated_params") and len(str(info.value)) <= 1000


class _Cyclic(list):
    pass


def test_what_cannot_be_copied_within_bounds_is_refused(deployment):
    """Too many values, too deep, or an object that is no plain value: a typed error, in bounded time."""
    glue.install()
    dep = deployment()
    for spoil in (lambda dp: dp.multimodal_embedding_handles[0].__setitem__("extra", list(range(10**6))),
                  lambda dp: dp.multimodal_embedding_handles[0].__setitem__("extra", _nested(200)),
                  lambda dp: dp.multimodal_embedding_handles[0].__setitem__("extra", object()),
                  lambda dp: dp.multimodal_embedding_handles[0].__setitem__("extra", memoryview(b"x")),
                  lambda dp: dp.multimodal_embedding_handles[0].__setitem__("extra", _tuple_cycle())):
        enc = _encode(dep)
        spoil(enc.disaggregated_params)
        with pytest.raises(HandoffError) as info:
            glue.prefill_request(enc, processor=dep.pd.input_processor)
        assert info.value.field.startswith("encoder_output.disaggregated_params") and len(str(info.value)) <= 1000
    enc = _encode(dep)  # a cycle is copied as a cycle (nothing loops)
    loop = _Cyclic([1])
    loop.append(loop)
    enc.disaggregated_params.multimodal_embedding_handles[0]["extra"] = loop
    req = glue.prefill_request(enc, processor=dep.pd.input_processor)
    held = req.disaggregated_params.multimodal_embedding_handles[0]["extra"]
    assert held is not loop and held[1] is held and held[0] == 1


def _tuple_cycle():
    inner: list = []
    outer = (inner,)
    inner.append(outer)
    return outer


class _Lying(dict):
    def items(self):
        return iter([("tensor_size", [1, 1])])

    def get(self, key, default=None):
        return [1, 1] if key == "tensor_size" else dict.get(self, key, default)


def test_subclasses_are_copied_as_stored(deployment):
    """A handle dict whose items()/get() lie is copied as it is stored (the check and the request see that)."""
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    handles = enc.disaggregated_params.multimodal_embedding_handles
    handles[0] = _Lying(handles[0])
    req = glue.prefill_request(enc, processor=dep.pd.input_processor)
    held = req.disaggregated_params.multimodal_embedding_handles[0]
    assert type(held) is dict and held["tensor_size"] == dict.__getitem__(handles[0], "tensor_size")


def _nested(depth):
    out: list = []
    for _ in range(depth):
        out = [out]
    return out
