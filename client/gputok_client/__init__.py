"""Client library and CLI for gputok's Triton models. See docs/serving.md."""

from .chunking import is_safe_cut, split_text
from .client import API_KEY_HEADER, GputokClient
from .errors import EXIT_CODES, ClientError, parse_url

__all__ = [
    "API_KEY_HEADER",
    "EXIT_CODES",
    "ClientError",
    "GputokClient",
    "is_safe_cut",
    "parse_url",
    "split_text",
]
__version__ = "0.1.0"
