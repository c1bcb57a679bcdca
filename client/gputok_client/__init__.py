"""Client library and CLI for gputok's Triton models. See docs/serving.md."""

from .chunking import is_safe_cut, split_text
from .client import API_KEY_HEADER, ClientError, GputokClient

__all__ = ["API_KEY_HEADER", "ClientError", "GputokClient", "is_safe_cut", "split_text"]
__version__ = "0.1.0"
