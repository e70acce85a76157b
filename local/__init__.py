"""Everything that runs on your own machine: the ``scheduler-dedup`` command and what it starts.

- :mod:`.cli`: the command (``demo``, ``run-local``, ``runs``, ``campaign``, ``check``).
- :mod:`.demo`, :mod:`.run_local`, :mod:`.campaign`, :mod:`.runs_cli`: one module per subcommand.
- :mod:`.store_servers`, :mod:`.firestore_emulator`: the real local store servers (started on a free loopback
  port, stopped by their own PID).
- :mod:`.servers`, :mod:`.serve_socket`: handler processes under functions-framework, as Cloud Run runs them.
- :mod:`.simulator`: a Cloud Scheduler simulator that delivers each run at least once, with faults.
- :mod:`.fault_proxy`: a gRPC proxy that injects faults between the handler and its store.
- :mod:`.baseline`, :mod:`.recording_job`: the no-dedup handler and the recording job of the demo and tests.
- :mod:`.reference`: the generated reference pages of the documentation site (``scripts/gen_docs``).

Nothing here is deployed: the handler (:mod:`scheduler_dedup.handler`) is what runs on Cloud Run.
"""
