"""Project-level facts the components share: the APIs they enable, where each service is offered, and which
project a child is created in. Imports only ``infra.errors``.
"""
