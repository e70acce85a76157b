"""Caller verification: OIDC tokens, allowed callers and audiences, App Engine's proof of a Scheduler delivery,
and trust mode's premise. Imports ``core`` and ``schedule``.
"""
