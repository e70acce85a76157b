"""``scheduler-dedup check``: the pack's rules on a program run under Pulumi mocks, and checking a policy
config, without the Pulumi CLI. Imports ``policies.rules``, ``policies.reading`` and ``infra.stack``.
"""
