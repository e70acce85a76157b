"""How a command that starts local servers ends: the same way on Ctrl-C, SIGTERM and SIGHUP.

Python turns SIGINT (Ctrl-C) into ``KeyboardInterrupt``, but SIGTERM (``kill``, a CI runner's timeout) and SIGHUP
(a closed terminal) end the process at once, without running a single ``finally``: every server and temporary
file the command owned would be left behind. :func:`ends_on_signals` makes SIGTERM and SIGHUP raise ``SystemExit``
(exit status 128 + the signal's number, as a shell reports it), so the command's context managers run, and ignores
further signals once one arrived, so that cleanup is not cut short by a second Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: Signals that end a command with its cleanup run.
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def ends_on_signals() -> Iterator[None]:
    """For the block: SIGINT raises ``KeyboardInterrupt``, SIGTERM and SIGHUP raise ``SystemExit(128 + signum)``;
    after the first of them, the others are ignored until the block ends. Outside the main thread: does nothing
    (Python delivers signals to the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(signum: int, frame: FrameType | None) -> None:
        for each in ENDING_SIGNALS:
            signal.signal(each, signal.SIG_IGN)  # let the cleanup finish
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    previous = {each: signal.signal(each, end) for each in ENDING_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
