"""``DedupStore`` (:mod:`.store`) and each store's component piece, one module per store (:mod:`.firestore`,
:mod:`.spanner`, :mod:`.memorystore`) named by its registration and sharing :mod:`.base`: the store's children, and
a job's part of it (``DedupScheduledJob`` asks the piece); with the TTL policy's owner (:mod:`.ttl_policy`) and what
a stack may own (:mod:`.ownership`: the project's ``(default)`` database is only adopted). Imports
the handler, ``infra.args``, ``infra.errors`` and ``infra.project``.
"""
