"""Exactly-once execution: claim, lease, fence, complete, and the job a run executes. Imports ``core``,
``schedule``, ``config`` and only the store contract (``stores.base``, ``open_store``), never a store.
"""
