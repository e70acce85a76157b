"""Each run store's own rules of the pack, one module per store (:mod:`.firestore`, :mod:`.memorystore`,
:mod:`.spanner`), each named by its store's registration (``pack_rules``,
:data:`scheduler_dedup.handler.stores.registry.STORES`), which is how they come into the pack's rules.
Imports the rules' :mod:`~scheduler_dedup.policies.rules.base` and :mod:`~scheduler_dedup.policies.rules.store`."""
