"""The root stack program (stack config in, components out), running it under Pulumi mocks, and hosting the
components as a provider for other languages. The top layer of ``infra``.
"""
