"""What the installed TensorRT-LLM is: its version, whether it is in range, whether it already has the fix.

Versions are compared with ``packaging`` when it is importable, else with a tiny PEP 440 subset
(``X.Y.Z`` plus ``rcN`` / ``aN`` / ``bN`` / ``.devN`` / ``.postN``), enough for TensorRT-LLM's tags.
Nothing here imports TensorRT-LLM at module import time.
"""

from __future__ import annotations

import importlib
import re
from typing import Optional

__all__ = [
    "ENGINE",
    "SUPPORTED_VERSIONS",
    "engine_version",
    "version_in_range",
    "upstream_fix_fields",
    "distribution_version",
]

ENGINE = "tensorrt_llm"

#: Releases whose hook points this glue was checked against (requirement-string form, as OTel does).
#: 1.3.0rc25 is the release of upstream issue #20138; main at 760a584 carries the same code.
SUPPORTED_VERSIONS = ("tensorrt_llm >= 1.2.0rc0, < 1.5",)

#: ``DisaggregatedParams`` fields that mean upstream carries the encoder layout itself.
UPSTREAM_FIX_FIELDS = ("multimodal_layout",)

_PRE = {"a": 0, "b": 1, "rc": 2}
_VERSION_RE = re.compile(
    r"^\s*v?(?P<rel>\d+(?:\.\d+)*)(?:[-_.]?(?P<pre>a|b|rc)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?(?:[-_.]?dev[-_.]?(?P<dev>\d*))?(?:\+.*)?\s*$",
    re.IGNORECASE,
)


def _tiny_key(text: str) -> tuple:
    """Sort key for a version string (a PEP 440 subset); raises ValueError when unparsable."""
    m = _VERSION_RE.match(text)
    if m is None:
        raise ValueError(f"unparsable version {text!r}")
    rel = [int(p) for p in m["rel"].split(".")]
    while len(rel) < 4:
        rel.append(0)
    pre = (_PRE[m["pre"].lower()], int(m["pre_n"] or 0)) if m["pre"] else (3, 0)
    dev = (0, int(m["dev"] or 0)) if m["dev"] is not None else (1, 0)
    post = int(m["post"] or 0) if m["post"] is not None else -1
    if m["dev"] is not None and not m["pre"] and m["post"] is None:
        pre = (-1, 0)  # X.Y.devN sorts before X.YaN
    return (tuple(rel), pre, post, dev)


def _tiny_in_range(version: str, clauses: str) -> bool:
    key = _tiny_key(version)
    ops = {
        ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    }
    for clause in filter(None, (c.strip() for c in clauses.split(","))):
        m = re.match(r"^(>=|<=|==|!=|>|<)\s*(.+)$", clause)
        if m is None:
            raise ValueError(f"unsupported requirement clause {clause!r}")
        bound = _tiny_key(m[2])
        if not ops[m[1]](key, bound):
            return False
        if m[1] == "<" and bound[1] == (3, 0) and key[0] == bound[0] and key[1] != (3, 0):
            return False  # as PEP 440: "< 1.5" excludes 1.5 pre-releases
    return True


def version_in_range(version: str, requirement: str) -> bool:
    """Whether ``version`` satisfies ``requirement`` (``"name >= A, < B"``, the name optional).

    Pre-releases count as inside the range, since TensorRT-LLM ships mostly ``rc`` builds.
    """
    clauses = requirement.strip()
    m = re.match(r"^[A-Za-z0-9_.\-]+\s*(?=[<>=!])", clauses)
    if m:
        clauses = clauses[m.end():]
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging is optional
        try:
            return _tiny_in_range(version, clauses)
        except ValueError:
            return False
    try:
        return SpecifierSet(clauses, prereleases=True).contains(Version(version), prereleases=True)
    except InvalidVersion:
        pass
    try:
        return _tiny_in_range(version, clauses)
    except ValueError:  # a version string no parser understands is outside every range
        return False


def distribution_version(name: str) -> Optional[str]:
    """An installed distribution's version from its metadata, without importing it."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version(name)
    except PackageNotFoundError:
        return None
    except Exception:  # broken metadata must not break a status report
        return None


def engine_version(module=None) -> Optional[str]:
    """``tensorrt_llm.__version__`` (the imported module's, else the distribution's)."""
    if module is None:
        module = importlib.import_module(ENGINE)
    value = getattr(module, "__version__", None)
    if isinstance(value, str) and value:
        return value
    return distribution_version(ENGINE) or distribution_version("tensorrt-llm")


def upstream_fix_fields() -> list:
    """The ``DisaggregatedParams`` fields that show upstream carries the layout itself (empty: no fix)."""
    try:
        mod = importlib.import_module(f"{ENGINE}.disaggregated_params")
    except Exception:
        return []
    fields = getattr(getattr(mod, "DisaggregatedParams", None), "__dataclass_fields__", None) or {}
    return [name for name in UPSTREAM_FIX_FIELDS if name in fields]
