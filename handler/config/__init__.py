"""The handler's settings: one immutable object read from the environment. Imports ``core``, ``schedule`` and
the store registry (each store reads its own settings).
"""
