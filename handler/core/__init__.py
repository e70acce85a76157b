"""Shared vocabulary of the handler: errors, the run record, answer statuses, log fields, safe text, declared
environment variables. Imports nothing else of ours.
"""
