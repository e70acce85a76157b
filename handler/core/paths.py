"""URL paths the handler serves besides Scheduler deliveries (which may arrive on any other path).

A module of its own because the Pulumi component imports it: it must not load the Firestore client
or google-api-core, whose protobufs clash with ``pulumi.provider``'s in the component provider process.
"""

from __future__ import annotations

#: The run check (:mod:`scheduler_dedup.handler.monitoring.run_check`): the watchdog Scheduler job POSTs here.
CHECK_PATH = "/dedup/run-check"



def is_check_path(path: str) -> bool:
    """True when a request for ``path`` is the run check: :data:`CHECK_PATH`, or a path that ends in it.

    The watchdog of a source deploy POSTs to ``https://REGION-PROJECT.cloudfunctions.net/NAME/dedup/run-check``.
    Google strips ``/NAME`` before a 1st gen function sees the path (GoogleCloudPlatform/functions-framework-python#54);
    no page says a 2nd gen function's ``cloudfunctions.net`` URL does too, so both forms are the check.
    """
    return path.rstrip("/").endswith(CHECK_PATH)


#: The watchdog sends this as ``X-Dedup-Location``. It is not a region, so a handler that takes the
#: request for a Scheduler delivery (an image older than the run check, or a proxy that dropped the
#: path) answers 400 and never runs the job; the run check ignores the header.
CHECK_LOCATION_GUARD = "(run-check)"

#: App Engine's reserved paths: it sends ``/_ah/start`` to a new basic- or manual-scaling instance and treats any
#: answer but 2xx or 404 as a failed start (https://cloud.google.com/appengine/docs/standard/how-instances-are-managed,
#: "Startup"). The handler answers 404 there, before any caller check or Firestore call; a Scheduler job's
#: relative URI must not start with it.
APP_ENGINE_RESERVED_PREFIX = "/_ah/"
