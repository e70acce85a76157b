"""Redis commands (RESP) named by the dedup protocol step they belong to (see :mod:`.wire`), for the RESP fault proxy.

==============  ==========================================================================
step            command
==============  ==========================================================================
``claim``       ``EVALSHA`` of the ``create`` script
``takeover``    ``EVALSHA`` of the ``update`` script setting ``status: in_progress``
``renewal``     ``EVALSHA`` of the ``update`` script leaving ``status`` alone
``completion``  ``EVALSHA`` of the ``update`` script setting ``status: completed``
``failure``     ``EVALSHA`` of the ``update`` script setting ``status: failed``
``release``     ``EVALSHA`` of the ``update`` script setting ``status: released``, or of the ``delete``
                script
``read``        ``EVALSHA`` of the ``read`` script
``query``       ``EVALSHA`` of the ``job_page`` and ``id_prefix`` scripts
``other``       anything else (``AUTH``, ``SELECT``, ``CLIENT``, ``SCRIPT LOAD``, ``WAIT``, ``INFO``...)
==============  ==========================================================================

The record id is the scripts' second argument (the run id). Imports nothing from redis-py.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_dedup.handler.stores.redis import values as redis_values
from scheduler_dedup.handler.stores.redis.lua import BY_SHA
from scheduler_dedup.handler.stores.wire import STATUS_STEPS, Call

_STEPS = {"create": "claim", "delete": "release", "read": "read", "job_page": "query", "id_prefix": "query"}


def classify(command: Sequence[bytes]) -> Call:
    """Name the protocol step of one Redis command (its arguments as sent, the command name first).

    Returns:
        A :class:`Call` with ``method`` the command name in upper case (``EVALSHA``); a command that is not one
        of the store's scripts is step ``other``.
    """
    if not command:
        return Call("", "other", "")
    method = bytes(command[0]).decode(errors="replace").upper()
    try:
        if method == "EVALSHA" and len(command) > 2:
            name = BY_SHA.get(bytes(command[1]).decode(errors="replace"))
            keys = int(command[2])
            args = list(command[3 + keys:])
            if name is None:
                return Call(method, "other", "")
            if name in ("job_page", "id_prefix"):
                return Call(method, "query", "")
            run_id = bytes(args[1]).decode(errors="replace")
            if name == "update":
                return Call(method, _update_step(args), run_id)
            return Call(method, _STEPS[name], run_id)
    except (ValueError, IndexError):
        pass
    return Call(method, "other", "")


def _update_step(args: Sequence[bytes]) -> str:
    """The step of an ``update`` script call from its field operations (``ARGV[7]`` on, see :mod:`.lua`)."""
    count = int(args[6])
    for i in range(count):
        kind, name, value = args[7 + 3 * i: 10 + 3 * i]
        if bytes(name) == b"status" and bytes(kind) == b"v":
            status = redis_values.decode(bytes(value))
            return STATUS_STEPS.get(status, "other") if isinstance(status, str) else "other"
    return "renewal"
