"""The one hook-table format every engine glue declares its hook points in, and how a row is found.

A :class:`Hook` row names a hook point (module, class, attribute), the wrapper installed on it, the check
point (:mod:`mm_handoff.glue.checkpoint`) the wrapper runs, and the facts a drift check needs (the leading
parameters the engine's function must take). Each engine's package holds one table of rows
(``mm_handoff.trtllm._hooks.PATCH_TABLE``, ``mm_handoff.vllm._hooks.HOOKS``, ``mm_handoff.sglang._hooks.HOOKS``);
:meth:`mm_handoff.glue.instrumentor.Instrumentor.apply` installs rows, each wrapper called as
``wrapper(wrapped, instance, args, kwargs, point=CheckPoint(...))`` with the policy bound in the point.

:func:`resolve` finds a row in the imported engine, as a :class:`HookPoint`: ``found``, ``missing`` (with the
reason) or ``drifted`` (not a plain function, or its parameters no longer start with the row's ``params``):
install refuses a drifted row before anything is touched.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import attrs

from ..errors import HandoffError
from .checkpoint import CheckPoint
from .ledger import WRAPPER_MARK, find_owner, target_key
from .policy import Policy
from .signals import CHECK_POINTS


def _check_point_name(instance, attribute, value) -> None:
    if value not in CHECK_POINTS:
        raise HandoffError("Hook.check_point", f"one of {list(CHECK_POINTS)}", value)


@attrs.frozen
class Hook:
    """One row of an engine's hook table."""

    module: str
    qualname: str
    attribute: str
    #: ``wrapper(wrapped, instance, args, kwargs, *, point)``: the hook body (:data:`mm_handoff.glue.ledger.Hook`)
    wrapper: Callable
    #: the check point the wrapper runs (a row that only gathers what another row's check needs, such as the
    #: encoder's ``_preprocess`` for ``generate_async``, names that row's point and records nothing itself)
    check_point: str = attrs.field(validator=_check_point_name)
    #: leading parameter names after ``self`` the engine's function must start with (None: not checked)
    params: tuple[str, ...] | None = None
    #: install refuses when a required hook point is missing
    required: bool = True
    #: the process that runs it: ``"user"`` (LLM / encoder / server process) or ``"worker"`` (executor worker)
    process: str = "user"
    #: the upstream file @ commit the wrapper was written against
    upstream: str = ""
    #: what the row is for, where an engine needs to tell (TensorRT-LLM: ``"slice"``, ``"prefill"``)
    role: str = ""
    #: also wrap the engine's registered subclasses that override the attribute (TensorRT-LLM's processors)
    covers_registered_overrides: bool = False

    @property
    def display(self) -> str:
        return f"{self.module}:{self.qualname}.{self.attribute}"

    def point(self, engine: str, policy: Policy) -> CheckPoint:
        """The check point the wrapper runs, for ``engine`` under ``policy``."""
        return CheckPoint(engine, self.check_point, policy, f"{self.qualname}.{self.attribute}")


@attrs.define
class HookPoint:
    """A :class:`Hook` row looked up in the imported engine."""

    hook: Hook
    #: ``"module:Qualname.attr"`` (the ledger key), or the row's display name when unresolved
    key: str
    cls: type | None = None
    attr: str | None = None
    #: found | missing (``cls`` set when the class is there without the attribute) | drifted
    state: str = "missing"
    reason: str = ""
    #: for a drifted hook: (what mm-handoff expects, what the engine has)
    drift: tuple | None = None

    @property
    def wrapper(self) -> Callable:
        return self.hook.wrapper


def check_signature(point: HookPoint, raw) -> HookPoint:
    """``point`` found, or drifted when ``raw`` is not a plain function whose parameters after ``self`` start
    with the row's ``params``."""
    if not inspect.isfunction(raw):
        point.state, point.reason = "drifted", f"{point.key} is {type(raw).__name__}, expected a plain method"
        point.drift = ("a plain method", type(raw).__name__)
        return point
    want = point.hook.params
    if want is not None:
        names = tuple(list(inspect.signature(raw).parameters)[1:])
        if names[:len(want)] != tuple(want):
            point.state = "drifted"
            point.reason = f"{point.key} takes {names}, expected it to start with {tuple(want)}"
            point.drift = (f"parameters starting {tuple(want)}", names)
            return point
    point.state = "found"
    return point


def unwrap_ours(raw):
    """The engine's own function, not an mm-handoff wrapper already in place."""
    while getattr(raw, WRAPPER_MARK, None) is not None and hasattr(raw, "__wrapped__"):
        raw = raw.__wrapped__
    return raw


def resolve(hook: Hook) -> HookPoint:
    """Find ``hook``'s row in the imported engine (see the module doc)."""
    point = HookPoint(hook, hook.display)
    try:
        module = importlib.import_module(hook.module)
    except Exception as exc:
        point.reason = f"module {hook.module} not importable ({type(exc).__name__}: {exc})"
        return point
    cls = getattr(module, hook.qualname, None)
    if not isinstance(cls, type):
        point.reason = f"{hook.module} has no class {hook.qualname}"
        return point
    point.cls = cls
    owner, raw = find_owner(cls, hook.attribute)
    if owner is None:
        point.reason = f"{hook.module}:{hook.qualname} has no {hook.attribute}"
        return point
    point.attr, point.key = hook.attribute, target_key(cls, hook.attribute)
    return check_signature(point, unwrap_ours(raw))


# ------------------------------------------------------------------------------- what doctor reports
def hook_rows(hooks, report: dict) -> list:
    """Each row of a hook table with its state, for ``mm-handoff doctor``: the status row where the glue is
    installed (patched or wrapped over), else as found in the engine's files (found, missing or drifted, with
    the reason)."""
    rows = {row["target"]: row for row in report.get("hooks", ())}
    out = []
    for hook in hooks:
        point = resolve(hook)
        row = rows.get(point.key)
        out.append({"target": point.key, "state": row["state"] if row else point.state,
                    "reason": "" if row else point.reason, "required": hook.required})
    return out


def hook_ok(row: dict) -> bool:
    """There (found, patched, wrapped over), or an optional one missing; a drifted one never is."""
    return row["state"] in ("found", "patched", "wrapped over") or (row["state"] == "missing" and not row["required"])


def print_hook_rows(rows: list, line) -> None:
    """The rows of :func:`hook_rows`, one line each (and the reason under one that is not there)."""
    for hook in rows:
        line(f"  [{hook['state']:>8}] {hook['target']}")
        if hook["reason"]:
            line(f"             {hook['reason']}")
