"""The scheduler-dedup policy pack.

- ``rules/``: the rules, one function each, one module per domain, registered in ``RULES``; no pulumi import needed.
- ``reading/``: resources as the rules see them (engine-shaped properties), values read failing closed, and which
  Scheduler job calls which handler service.
- ``limits.py``: the Google Cloud limits the rules enforce, each with its source.
- ``pack.py``: the CrossGuard adapters ``__main__.py`` serves (``pulumi preview --policy-pack policies``).
- ``examples/``: stack configs and a program each rule must flag (and one it must pass), for the tests and the docs.
- ``offline/``: ``scheduler-dedup check``, the same rules on the program run under Pulumi mocks.
"""
