"""Stopping a long job cleanly: Ctrl-C and SIGTERM end it with one line, never mid-write.

A kill signal that lands while orbax writes a checkpoint interrupts orbax's worker threads and
asyncio loop, which print dozens of tracebacks and leave a half-written step behind. So:

* :func:`sigterm_raises` turns SIGTERM into :class:`Terminated` (a KeyboardInterrupt) in the
  main thread, so ``train`` and ``sweep`` stop as Ctrl-C does (the CLI prints "interrupted",
  exit 130) and ``finally`` blocks (claims, checkpoint managers) run;
* :func:`deferred` holds SIGINT and SIGTERM back while a checkpoint or record is written and
  delivers them when the write is complete, so the run resumes from that checkpoint exactly;
  and while XLA compiles (:func:`depthwidth.models.engine.build_engine`). jaxlib compiles in a
  C++ worker thread while the main thread polls ``PyErr_CheckSignals``: a KeyboardInterrupt
  raised there returned to Python with the compile still running, and the interpreter's
  teardown under that thread segfaulted (exit 139, issue 24). Held, the signal lets the
  compile finish (seconds to a minute) and then stops the run as usual (exit 130).

Both only act in the main thread (Python delivers signals there); elsewhere they do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "sigterm_raises", "deferred"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread (a KeyboardInterrupt, so every cleanup path treats it alike)."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_for(signum: int):
    if signum == signal.SIGTERM:
        raise Terminated("SIGTERM")
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_raises():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (old handler restored after)."""
    if not _main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, lambda signum, frame: _raise_for(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def deferred():
    """Hold SIGINT/SIGTERM until the block ends, then raise KeyboardInterrupt (or Terminated).

    A signal that arrives in the block is remembered, not acted on; the block runs to its end
    (or its own exception), the previous handlers come back, and then the first held signal is
    raised. A signal whose previous handler was "ignore" stays ignored.
    """
    if not _main_thread():
        yield
        return
    held: list[int] = []
    signums = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in signums}
    for s in signums:
        if old[s] is not signal.SIG_IGN:
            signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for s in signums:
            if old[s] is not signal.SIG_IGN:
                signal.signal(s, old[s])
    if held:
        if held[0] == signal.SIGTERM and old[signal.SIGTERM] in (signal.SIG_DFL, None):
            _raise_for(signal.SIGTERM)  # SIGTERM's default would kill us: stop as Ctrl-C does
        handler = old[held[0]]
        if callable(handler):
            handler(held[0], None)
        else:
            _raise_for(held[0])
