"""``DedupStore`` and each store's component piece (Firestore, Spanner, Memorystore), with the TTL policy's
owner. Imports the handler, ``infra.args`` and ``infra.project``.
"""
