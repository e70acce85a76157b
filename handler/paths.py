"""URL paths the handler serves besides Scheduler deliveries (which may arrive on any other path).

A module of its own because the Pulumi component imports it: it must not load the Firestore client
or google-api-core, whose protobufs clash with ``pulumi.provider``'s in the component provider process.
"""

from __future__ import annotations

#: The run check (:mod:`scheduler_dedup.handler.run_check`): the watchdog Scheduler job POSTs here.
CHECK_PATH = "/dedup/run-check"
