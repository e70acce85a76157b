"""Project-level facts the components share: the APIs they enable, where each service is offered, which
project a child is created in, and how Google names each resource: the names in words, not module by module
(``resource_names`` holds the one table of naming rules). Imports only ``infra.errors``.
"""
