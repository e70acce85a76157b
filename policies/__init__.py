"""The scheduler-dedup policy pack.

- :mod:`.rules`: the rules (one function each, one module per domain, registered in ``RULES``), no pulumi
  import needed;
- :mod:`.model`, :mod:`.topology`, :mod:`.limits`: engine-shaped properties, job/service pairing, GCP limits;
- :mod:`.pack`: CrossGuard adapters used by ``__main__.py`` (``pulumi preview --policy-pack policies``);
- :mod:`.offline`: ``scheduler-dedup check``, the same rules under Pulumi mocks.
"""
