"""Guards around one crawl: one crawl per model at a time, and a plain forward's depth.

Two crawls of one model from two threads would each save and restore its training flags and
leave it changed; the per-model lock serialises them (the second waits). The crawl's hooks
add one Python frame to every module call, so the recursion limit is raised by that share for
the crawl's call (and restored after the last concurrent crawl ends): a model that runs as a
plain forward also runs under the crawl.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Iterator

from torch import nn

# frames per nested module call: a plain forward takes 4 (_wrapped_call_impl, _call_impl,
# forward, the child call's line); the hooked path adds _call_impl's inner() wrapper
_HOOK_SHARE = 4
_MARGIN = 100  # the crawl's own frames around the forward (hooks, dispatch, capture)

_registry_lock = threading.Lock()
_model_locks: weakref.WeakKeyDictionary[nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_depth_users = [0]
_saved_limit = [0]


@contextlib.contextmanager
def model_lock(module: nn.Module) -> Iterator[None]:
    """Hold ``module``'s crawl lock for the block (re-entrant within one thread)."""
    with _registry_lock:
        lock = _model_locks.get(module)
        if lock is None:
            lock = _model_locks[module] = threading.RLock()
    with lock:
        yield


@contextlib.contextmanager
def depth_headroom() -> Iterator[None]:
    """Raise the recursion limit by the hooks' share for the block; restore it afterwards."""
    with _registry_lock:
        if _depth_users[0] == 0:
            _saved_limit[0] = sys.getrecursionlimit()
            sys.setrecursionlimit(_saved_limit[0] + _saved_limit[0] // _HOOK_SHARE + _MARGIN)
        _depth_users[0] += 1
    try:
        yield
    finally:
        with _registry_lock:
            _depth_users[0] -= 1
            if _depth_users[0] == 0:
                sys.setrecursionlimit(_saved_limit[0])
