"""Everything that runs on your own machine: the ``scheduler-dedup`` command and what it starts. Nothing here is
deployed; the handler (:mod:`scheduler_dedup.handler`) is what runs on Cloud Run.

- ``commands/``: the command line (``cli.py``) and one module per subcommand.
- ``servers/``: the real local store servers and handler processes, each started on a free loopback port and
  stopped by its own PID.
- ``faults/``: proxies between a store's client and its server that inject faults on the wire (gRPC, RESP).
- ``demo/``: the Cloud Scheduler simulator, the recording job and the no-dedup baseline of the demo and tests.
- ``campaigns/``: seeded fault campaigns checked by invariants, and the Redis failover campaign.

Each folder imports only the folders listed before it (tests/test_layout.py).
"""
