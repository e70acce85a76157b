"""Seeded fault campaigns against real handler processes, checked by invariants, and the Redis failover
campaign. Imports ``local.servers`` and ``local.faults``.
"""
