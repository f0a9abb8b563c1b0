"""Stand-in for ``tensorrt_llm/executor/utils.py`` (``RequestError`` only)."""


class RequestError(RuntimeError):
    """Error raised for a failed request (mirrors upstream's type)."""
