"""Seeded fault campaigns against real handler processes, checked by invariants: the run (:mod:`.campaign`), its
scenarios (:mod:`.scenarios`), the handler processes (:mod:`.fleet`), at-least-once delivery (:mod:`.delivery`),
what is observed (:mod:`.results`, :mod:`.observers`), the invariants (:mod:`.invariants`) and the report
(:mod:`.report`); the overlap campaign (:mod:`.overlap`) and the Redis failover campaign (:mod:`.failover`).
Imports ``local.servers`` and ``local.faults``.
"""
