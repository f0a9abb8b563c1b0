"""Stand-in for ``tensorrt_llm/inputs/content_format.py``."""

import enum


class ContentFormat(enum.Enum):
    OPENAI = "openai"
    STRING = "string"
    PASSTHROUGH = "passthrough"
