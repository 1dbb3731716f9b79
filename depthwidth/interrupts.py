"""Stopping a long job cleanly: Ctrl-C and SIGTERM end it with one line, never mid-write.

A kill signal that lands while orbax writes a checkpoint interrupts orbax's worker threads and
asyncio loop, which print dozens of tracebacks and leave a half-written step behind. So:

* :func:`sigterm_raises` turns SIGTERM into :class:`Terminated` (a KeyboardInterrupt) in the
  main thread, so ``train`` and ``sweep`` stop as Ctrl-C does (the CLI prints "interrupted",
  exit 143) and ``finally`` blocks (claims, checkpoint managers) run;
* :func:`deferred` holds SIGINT and SIGTERM back while a checkpoint or record is written and
  delivers them when the write is complete, so the run resumes from that checkpoint exactly;
  and while XLA compiles (:func:`depthwidth.models.engine.build_engine`). jaxlib compiles in a
  C++ worker thread while the main thread polls ``PyErr_CheckSignals``: a KeyboardInterrupt
  raised there returned to Python with the compile still running, and the interpreter's
  teardown under that thread segfaulted (exit 139, issue 24). Held, the signal lets the
  compile finish (seconds to a minute) and then stops the run as usual (exit 130 or 143);
* :func:`honoured` (the CLI, around every command) makes both signals raise and remembers them,
  so a Ctrl-C that a library swallows (a KeyboardInterrupt raised inside jax's garbage-collection
  callback is printed by Python as "Exception ignored" and dropped) still stops the command:
  :func:`check` raises it again between stages and when the command returns;
* :func:`graceful` (the training loop) only records the signal in a :class:`Stop`; the loop
  finishes its step, saves a checkpoint at that step and raises :class:`Interrupted`, whose
  message says where the rerun resumes.

Exit codes (:func:`exit_code`): 130 for SIGINT, 143 for SIGTERM (128 + the signal number, the
shell's convention). All of them only act in the main thread (Python delivers signals there);
elsewhere they do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

__all__ = ["Terminated", "Interrupted", "Stop", "sigterm_raises", "deferred", "graceful", "honoured", "check",
           "exit_code", "sigint_handled"]

# Signals received in this process since :func:`honoured` began (the CLI's command), in order;
# nothing is recorded outside it (a library caller, a test), so check() there raises nothing.
_received: list[int] = []
_honouring = False


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread (a KeyboardInterrupt, so every cleanup path treats it alike)."""


class Interrupted(KeyboardInterrupt):
    """A signal acted on cleanly (:func:`graceful`): ``signum``, and the message (one line) says
    where the work resumes. A KeyboardInterrupt, so every cleanup path treats it alike."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum


def exit_code(e: BaseException | None) -> int:
    """128 + the signal's number: 143 for SIGTERM (:class:`Terminated`, or an :class:`Interrupted`
    by SIGTERM), 130 for SIGINT and any other KeyboardInterrupt."""
    if isinstance(e, Terminated) or getattr(e, "signum", None) == signal.SIGTERM:
        return 128 + signal.SIGTERM
    return 128 + signal.SIGINT


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
    old = signal.signal(signal.SIGTERM, _remember_and_raise)
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


@contextlib.contextmanager
def sigint_handled():
    """Within the block, SIGINT raises KeyboardInterrupt even where it arrived ignored, and is
    remembered for :func:`check` and :func:`graceful`, as under :func:`honoured`; the old handler
    and unraisable hook come back after. For a process whose SIGINT belongs to another program,
    not to a user's terminal: a Ray worker, where ``ray.cancel`` is ``_thread.interrupt_main``.

    Two ways a cancel was lost there (measured, Ray 2.60, 2 CPUs under load): a worker started
    from a background job inherits an ignored SIGINT, and the cancelled task ran on to its end;
    and a KeyboardInterrupt raised inside jax's ``_xla_gc_callback`` (a task still importing jax
    or starting its backend) is printed as "Exception ignored" and dropped. In 8 probe and test runs
    every task stopped by force had the second in its worker's log (docs/scale/ray.md). Remembered, the
    signal stops the training loop at its first step (:func:`graceful`)."""
    global _honouring
    if not _main_thread():
        yield
        return
    outer = _honouring
    if not outer:
        _received.clear()
    old = signal.signal(signal.SIGINT, _remember_and_raise)
    prev_hook = sys.unraisablehook
    sys.unraisablehook = _without_keyboard_interrupts(prev_hook)
    _honouring = True
    try:
        yield
    finally:
        _honouring = outer
        if not outer:
            _received.clear()
        sys.unraisablehook = prev_hook
        signal.signal(signal.SIGINT, old)


def _without_keyboard_interrupts(prev_hook):
    """An unraisable hook that drops KeyboardInterrupts (acted on through :func:`check` and
    :func:`graceful`, so Python's "Exception ignored" traceback would only mislead) and passes
    everything else to ``prev_hook``."""

    def hook(u):
        if not _is_keyboard_interrupt(u):
            prev_hook(u)

    return hook


class Stop:
    """What :func:`graceful` yields: ``signum``, the first signal received in the block (None: none yet)."""

    signum: int | None = None

    def __call__(self, signum: int, frame) -> None:
        if _honouring:
            _received.append(signum)
        if self.signum is None:
            self.signum = signum


@contextlib.contextmanager
def graceful() -> Iterator[Stop]:
    """Within the block, SIGINT and SIGTERM only set the yielded :class:`Stop`'s ``signum``: the
    block checks it at its safe points (the training loop after each step) and stops there.

    A second signal is recorded too, not acted on; a signal whose handler was "ignore" (SIGINT
    under nohup) stays ignored. The previous handlers come back after the block; a signal the
    block saw is not raised again on exit (the block raises :class:`Interrupted` itself).
    A signal remembered before the block (:func:`honoured`, :func:`sigint_handled`) whose
    KeyboardInterrupt a library swallowed is the block's from the start: it stops at its first
    safe point.
    """
    stop = Stop()
    if not _main_thread():
        yield stop
        return
    if _received:
        stop.signum = _received[0]
    signums = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in signums}
    for s in signums:
        if old[s] is not signal.SIG_IGN:
            signal.signal(s, stop)
    try:
        yield stop
    finally:
        for s in signums:
            if old[s] is not signal.SIG_IGN:
                signal.signal(s, old[s])


def _remember_and_raise(signum: int, frame) -> None:
    if _honouring:
        _received.append(signum)
    _raise_for(signum)


def _is_keyboard_interrupt(u) -> bool:
    return isinstance(u.exc_value, KeyboardInterrupt)


@contextlib.contextmanager
def honoured() -> Iterator[None]:
    """The CLI's block around a command: SIGINT raises KeyboardInterrupt and SIGTERM
    :class:`Terminated`, and both are remembered for :func:`check`; a KeyboardInterrupt that
    Python could only print as "Exception ignored" (raised in a ``__del__`` or a gc callback,
    such as jax's ``_xla_gc_callback``) is not printed, since :func:`check` acts on it.

    SIGINT that arrives ignored (nohup) stays ignored. Handlers and the unraisable hook are
    restored after the block.
    """
    global _honouring
    _received.clear()
    if not _main_thread():
        yield
        return
    old_int, old_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    if old_int is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _remember_and_raise)
    signal.signal(signal.SIGTERM, _remember_and_raise)
    prev_hook = sys.unraisablehook
    sys.unraisablehook = _without_keyboard_interrupts(prev_hook)
    _honouring = True
    try:
        yield
    finally:
        _honouring = False
        _received.clear()  # acted on inside the block (check); a later command must not see them
        sys.unraisablehook = prev_hook
        if old_int is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)


def check() -> None:
    """Raise KeyboardInterrupt (SIGINT) or :class:`Terminated` (SIGTERM) if a signal arrived
    since :func:`honoured` began, even one whose exception a library swallowed: called between
    the stages of a command (``reproduce``: sweep, then fit, then figures) and when it returns."""
    if _received:
        _raise_for(_received[0])
