"""The request-handler contract of served runs (what ``measure_served`` calls).

A handler takes one sample and returns its response. A response that is an iterator (a
generator, ``iter(...)``) is a token stream: each item it yields is one output token, the
first one marks the time to first token and the stream's end marks the request's end. With
batching (``max_batch > 1``) the handler takes a list of samples and returns a list of the
same length. Anything else (a tensor, a list, a string, None) is a whole response, done when
the call returns. Handlers run on the package's server threads, never on LoadGen's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeAlias

TokenStream: TypeAlias = Iterator[Any]
"""A streamed response: one yielded item per output token."""


class RequestHandler(Protocol):
    """One sample in, its response (or a :data:`TokenStream`) out."""

    def __call__(self, sample: Any, /) -> Any: ...


class BatchHandler(Protocol):
    """A list of samples in, one response per sample out (same order, same length)."""

    def __call__(self, samples: list[Any], /) -> Sequence[Any]: ...


AnyHandler: TypeAlias = RequestHandler | BatchHandler | Callable[..., Any]


def is_token_stream(response: object) -> bool:
    """A response is streamed when it is an iterator (lists, tensors, strings are not)."""
    return isinstance(response, Iterator)


def handler_name(handler: object) -> str:
    """A readable name for reports and errors (module.qualname where there is one)."""
    target = getattr(handler, "__func__", handler)
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{qualname}" if module else str(qualname)
