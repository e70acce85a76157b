"""A value made in the process that uses it, and made again in a process forked since (:class:`PerProcess`).

For store clients and what holds them. functions-framework imports ``main.py`` in gunicorn's arbiter and forks the
worker from it, and gRPC (Firestore's and Spanner's clients) does not survive a fork: "gRPC Python wraps gRPC core,
which uses multithreading for performance, and hence doesn't support fork()"; only objects made after the fork are
safe (https://github.com/grpc/grpc/blob/master/doc/fork_support.md). A worker that used a channel the arbiter had
used blocked for good on the channel's lock, in about 1 delivery in 50.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """A value made on the first :meth:`get` in a process, and again on the first :meth:`get` after a fork.

    Args:
        make: makes the value; what it raises, :meth:`get` raises (and the next call tries again).
    """

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._made: tuple[int, T] | None = None
        self._lock = threading.Lock()
        # a thread of the parent may hold the lock at the fork; the child's only thread must not wait for it
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def get(self) -> T:
        """This process's value, made now if this process has none yet."""
        made = self._made
        if made is not None and made[0] == os.getpid():
            return made[1]
        with self._lock:
            if self._made is None or self._made[0] != os.getpid():
                self._made = (os.getpid(), self._make())
            return self._made[1]
