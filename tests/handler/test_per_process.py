"""``PerProcess``: a value made in the process that uses it, made again after a fork (a store client must not cross
one: handler/core/per_process.py)."""

from __future__ import annotations

import os
import signal
import threading

from scheduler_dedup.handler.core.per_process import PerProcess


def _in_child(fn: "object") -> int:
    """Fork, run ``fn()`` in the child and exit with what it returns (an int); the child's exit status (-14, SIGALRM,
    for a child still blocked after 20 s)."""
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(20)
            os._exit(fn())  # type: ignore[operator]
        except BaseException:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_process_makes_its_own_value_and_the_parent_keeps_its_own() -> None:
    made: list[int] = []

    def make() -> int:
        made.append(os.getpid())
        return os.getpid()

    value = PerProcess(make)
    parent = value.get()
    assert value.get() == parent and made == [parent]  # made once per process
    assert _in_child(lambda: 0 if value.get() == os.getpid() != parent else 1) == 0
    assert value.get() == parent and made == [parent]  # the child's making left the parent's value alone


def test_a_fork_while_another_thread_makes_the_value_does_not_block_the_child() -> None:
    """A parent thread inside ``make`` holds the lock at the fork; the child, whose only thread that is not, makes
    its own value instead of waiting for a lock nobody in it will release."""
    inside, finish = threading.Event(), threading.Event()

    def make() -> int:
        if os.getpid() == parent_pid:
            inside.set()
            finish.wait(30)
        return os.getpid()

    parent_pid = os.getpid()
    value = PerProcess(make)
    maker = threading.Thread(target=value.get)
    maker.start()
    assert inside.wait(30)
    try:
        assert _in_child(lambda: 0 if value.get() == os.getpid() else 1) == 0
    finally:
        finish.set()
        maker.join(30)
    assert value.get() == parent_pid


def test_a_make_that_raises_is_tried_again_on_the_next_get() -> None:
    calls: list[int] = []

    def make() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("store unreachable")
        return "client"

    value = PerProcess(make)
    try:
        value.get()
    except RuntimeError:
        pass
    assert value.get() == "client" and len(calls) == 2
