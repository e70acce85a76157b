"""Hold Ctrl-C, SIGTERM and SIGHUP while a process is started, so its owner always learns its PID.

``subprocess.Popen`` forks and execs the child before it returns; a ``KeyboardInterrupt`` (or the ``SystemExit``
that :func:`~scheduler_dedup.local.commands.lifetime.ends_on_signals` makes of SIGTERM) raised inside it leaves the
child running with no ``Popen`` object to stop it, and a server started in a session of its own does not get the
terminal's Ctrl-C either: an orphan. :func:`signals_held` defers such a signal to the end of the block, where the
``Popen`` object is already stored, so the owner's cleanup stops it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: The signals held: those that end a command (Ctrl-C, ``kill``, a closed terminal).
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def signals_held() -> Iterator[None]:
    """For the block, record :data:`HELD_SIGNALS` instead of acting on them; when it ends, restore the handlers
    and deliver the first one recorded to its handler (the ``KeyboardInterrupt`` or ``SystemExit`` then raised
    where the block ends). Outside the main thread (where Python runs no signal handler): does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = {each: signal.signal(each, hold) for each in HELD_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():  # None: a handler not set from Python, i.e. the default
            signal.signal(each, handler if handler is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])
