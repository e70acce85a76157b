"""``DedupScheduledJob``, the component: its inputs resolved and validated, its deploy archive, App Engine as a
target, and its alerts. Imports the handler, ``infra.args``, ``infra.project`` and ``infra.stores`` (its ``base`` and
``store`` only: each store's part is its component piece's, found through the store's registration).
"""
