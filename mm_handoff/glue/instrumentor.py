"""The one lifecycle both engine glues share: install, uninstall, status, in the manner of OpenTelemetry.

An :class:`Instrumentor` (OpenTelemetry's ``BaseInstrumentor``, carried over) owns what every glue
needs and must get right once: a lock, the installed state, the version gate, the policy bound into
the wrappers, and the patch ledger (:mod:`mm_handoff.glue.ledger`). ``mm_handoff.trtllm`` and
``mm_handoff.vllm`` each supply a subclass with only their engine's part:

* :meth:`~Instrumentor.instrumentation_dependencies`: the engine versions the hook points were
  checked against, as requirement strings (``"tensorrt_llm >= 1.3.0rc25, < 1.5"``);
* :meth:`~Instrumentor._instrument`: find the rows of its hook table (:class:`mm_handoff.glue.hooks.Hook`),
  refusing a drifted one before anything is touched, and apply their wrappers through
  :meth:`~Instrumentor.apply`, all or nothing, each bound to its check point
  (:class:`mm_handoff.glue.checkpoint.CheckPoint`: the engine, the point's name, the policy);
* :meth:`~Instrumentor._uninstrument` and :meth:`~Instrumentor._status`: the engine's own state.

``install`` reads the settings strictly first (``MM_HANDOFF_POLICY``, ``MM_HANDOFF_METRICS``: a bad value is
a typed error, nothing installed). It is idempotent (a second call logs "already installed" and changes
nothing) and strict (an absent or out-of-range engine raises :class:`~mm_handoff.errors.EngineNotSupportedError` before
anything is touched); ``uninstall`` switches every wrapper off, then restores the originals, and is
harmless when nothing is installed.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from collections.abc import Iterable

from ..errors import EngineNotSupportedError, HandoffError
from .hooks import Hook
from .ledger import Ledger, find_owner, target_key
from .policy import Policy, resolve_policy
from .signals import SIGNALS


# ------------------------------------------------------------------------------- version gate
def version_in_range(version: str, requirement: str) -> bool:
    """Whether ``version`` satisfies ``requirement`` (``"name >= A, < B"``), by PEP 440 (``packaging``,
    a dependency of both engines). Pre-releases count as inside the range, since TensorRT-LLM ships
    mostly ``rc`` builds; an unparsable version is outside every range."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        specifier = Requirement(requirement).specifier
    except InvalidRequirement:
        specifier = SpecifierSet(requirement)
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def supports(version: str | None, requirements: Iterable[str]) -> bool:
    """Whether ``version`` is inside every requirement (a missing version is inside none)."""
    return bool(version) and all(version_in_range(str(version), r) for r in requirements)


def distribution_version(name: str) -> str | None:
    """An installed distribution's version from its metadata, without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None
    except Exception:  # broken metadata must not break a status report
        return None


def engine_version(module, distributions: Iterable[str] = ()) -> str | None:
    """``module.__version__``, else the first of ``distributions`` that is installed."""
    value = getattr(module, "__version__", None)
    if isinstance(value, str) and value:
        return value
    return next((v for v in map(distribution_version, distributions) if v), None)


# ------------------------------------------------------------------------------- the lifecycle
class Instrumentor:
    """Install / uninstall / status for one engine (see the module doc); subclasses set the class
    attributes and implement :meth:`instrumentation_dependencies` and :meth:`_instrument`."""

    #: the engine's import name, which also names its version in :meth:`status`
    engine: str = ""
    #: the engine's name in the metrics and events (one of :data:`mm_handoff.glue.signals.ENGINES`)
    label: str = ""
    #: distributions whose metadata gives the version when the module has no ``__version__``
    distributions: tuple[str, ...] = ()
    #: how to install the engine, for the refusal when it cannot be imported
    install_hint: str = ""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.ledger = Ledger(log=log)
        self.lock = threading.RLock()
        self.installed = False
        #: the policy bound into every wrapper by the last install()
        self.policy = Policy.RAISE
        self.engine_version: str | None = None

    # ------------------------------------------------------------ what a subclass supplies
    def instrumentation_dependencies(self) -> tuple[str, ...]:
        """The engine versions this glue's hook points were checked against (requirement strings)."""
        raise NotImplementedError

    def _instrument(self, policy: Policy) -> bool:
        """Apply the wrappers (through :meth:`apply`); ``False`` when nothing was patched."""
        raise NotImplementedError

    def _uninstrument(self) -> None:
        """The engine's own state after the ledger restored every original (nothing by default)."""

    def _status(self, report: dict, probe_engine: bool) -> None:
        """Add the engine's own fields (hook points, upstream state) to ``report``. By default: the engine's
        version before :meth:`install` read it, asked of the engine module when importable."""
        name = self.engine
        if not probe_engine or report[name] is not None:
            return
        try:
            report[name] = engine_version(importlib.import_module(name), self.distributions)
        except Exception as exc:  # not installed: status still answers
            report[name] = f"unavailable ({type(exc).__name__})"

    # ------------------------------------------------------------------------ the lifecycle
    def install(self, *, policy: str | Policy | None = None) -> dict:
        """Check the engine, then patch its hook points; returns :meth:`status`. Idempotent and strict."""
        resolved = resolve_policy(policy)
        SIGNALS.configure()
        with self.lock:
            if self.installed:
                self.log.info("mm-handoff: already installed (policy=%s); nothing changed", self.policy.value)
                return self.status()
            version = engine_version(self._import_engine(), self.distributions)
            self._check_version(version)
            self.engine_version = version
            if self._instrument(resolved):
                self.policy, self.installed = resolved, True
            return self.status()

    def apply(self, rows: Iterable[tuple[Hook, type, str]], policy: Policy) -> list:
        """Wrap each ``(hook row, class, attribute)``, the row's wrapper bound to its check point under
        ``policy``; all or nothing. Returns the keys."""
        applied: list[str] = []
        try:
            for row, cls, attr in rows:
                self.ledger.apply(cls, attr, functools.partial(row.wrapper, point=row.point(self.label, policy)))
                applied.append(target_key(cls, attr))
        except Exception:
            for key in reversed(applied):
                self.ledger.remove(key)
            raise
        return applied

    def uninstall(self) -> dict:
        """Switch every wrapper off, then restore the originals (own: put back; inherited: delete).

        A wrapper that someone wrapped on top of is left in place, switched off, with a warning.
        Harmless when nothing is installed.
        """
        with self.lock:
            if not self.installed:
                self.log.info("mm-handoff: not installed; nothing to uninstall")
            self.ledger.switch_off_all()
            for record in reversed(self.ledger.records()):
                self.ledger.remove(record.key)
            self._uninstrument()
            self.installed = False
            return self.status(probe_engine=False)

    def is_installed(self) -> bool:
        return self.installed

    def status(self, *, probe_engine: bool = True) -> dict:
        """Installed, policy, the engine's version and the supported range, the patches, plus the engine's own."""
        with self.lock:
            try:
                policy = (self.policy if self.installed else resolve_policy(None)).value
            except HandoffError as exc:
                policy = f"invalid ({exc})"
            report = {"installed": self.installed, "policy": policy, self.engine: self.engine_version,
                      "supported": list(self.instrumentation_dependencies()),
                      "hooks": [{"target": r.key, "state": "patched" if self.ledger.is_current(r) else "wrapped over"}
                                for r in self.ledger.records()],
                      "left_in_place": self.ledger.left_in_place()}
            self._status(report, probe_engine)
            return report

    def get_original(self, target) -> object:
        """The engine's own function for ``"module:Qualname.attr"`` or ``(cls, "attr")``, installed or not
        (the first original ever recorded wins)."""
        if isinstance(target, tuple):
            cls, attr = target
            key = target_key(cls, attr)
        else:
            key, cls, attr = str(target), None, None
        with self.lock:
            original = self.ledger.get_original(key)
        if original is not None:
            return original
        if cls is None:
            module_name, _, rest = key.partition(":")
            qual, _, attr = rest.rpartition(".")
            cls = importlib.import_module(module_name)
            for part in qual.split("."):
                cls = getattr(cls, part)
        owner, raw = find_owner(cls, attr)
        if owner is None:
            raise AttributeError(f"{key}: no such attribute")
        return raw

    # ---------------------------------------------------------------------------- the gate
    def version_supported(self, version: str | None) -> bool:
        return supports(version, self.instrumentation_dependencies())

    def refuse(self, field: str, expected, actual, hint: str | None = None) -> EngineNotSupportedError:
        return EngineNotSupportedError(field, expected, actual, hint=hint)

    def _import_engine(self):
        try:
            return importlib.import_module(self.engine)
        except Exception as exc:
            raise self.refuse(self.engine, f"an importable {self.engine}", f"{type(exc).__name__}: {exc}",
                              hint=self.install_hint or None) from exc

    def _check_version(self, version: str | None) -> None:
        requirements = self.instrumentation_dependencies()
        if version is None:
            raise self.refuse(f"{self.engine}.__version__", " and ".join(requirements), None)
        for requirement in requirements:
            if not version_in_range(version, requirement):
                raise self.refuse(f"{self.engine} version", requirement, version,
                                  hint="mm-handoff's hook points were checked for that range only")
