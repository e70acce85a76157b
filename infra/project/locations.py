"""Where Cloud Scheduler, Cloud Run and Firestore are offered: one list per service, with its source and date.

A region one of them lacks (or a misspelt one, ``europe-west99``) would fail only at ``pulumi up``:
:func:`region_problem` refuses it at preview, naming the service that lacks it and the nearest
spelling (:mod:`difflib`). One implementation for the component (``region``, ``database_location``, a store's
``location``) and the policy pack.

Sources, as stored on 2026-12-01:

* Cloud Run: https://cloud.google.com/run/docs/locations (Tier 1 and Tier 2 pricing lists; services and jobs).
* Cloud Scheduler: https://cloud.google.com/scheduler/docs/locations and its release notes
  (https://cloud.google.com/scheduler/docs/release-notes: europe-west4, me-central1, me-central2 and me-west1 on
  2026-04-17, asia-southeast3 on 2026-09-18, asia-south2, europe-west12 and northamerica-northeast2 on 2026-09-24).
  The stored copy of the locations page could not be read whole, so the list is Cloud Run's regions plus those the
  release notes add: a region Scheduler lacks there may pass preview.
* Firestore: https://cloud.google.com/firestore/docs/locations (multi-regions ``nam5``, ``nam7``, ``eur3``; regional
  locations). Its regional list is taken as Cloud Run's regions plus ``northamerica-south1``.

Update the lists (and :data:`AS_OF`) when a service adds a region; a test keeps them consistent.

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

import difflib

AS_OF = "2026-12-01"

CLOUD_RUN_REGIONS: frozenset[str] = frozenset({
    # Tier 1
    "asia-east1", "asia-northeast1", "asia-northeast2", "europe-north1", "europe-southwest1", "europe-west1",
    "europe-west4", "europe-west8", "europe-west9", "me-west1", "us-central1", "us-east1", "us-east4", "us-east5",
    "us-south1", "us-west1",
    # Tier 2
    "africa-south1", "asia-east2", "asia-northeast3", "asia-southeast1", "asia-southeast2", "asia-south1",
    "asia-south2", "australia-southeast1", "australia-southeast2", "europe-central2", "europe-west10",
    "europe-west12", "europe-west2", "europe-west3", "europe-west6", "me-central1", "me-central2",
    "northamerica-northeast1", "northamerica-northeast2", "southamerica-east1", "southamerica-west1", "us-west2",
    "us-west3", "us-west4",
})
CLOUD_SCHEDULER_REGIONS: frozenset[str] = CLOUD_RUN_REGIONS | frozenset({
    "europe-west4", "me-central1", "me-central2", "me-west1", "asia-southeast3", "asia-south2", "europe-west12",
    "northamerica-northeast2",
})
FIRESTORE_MULTI_REGIONS: frozenset[str] = frozenset({"nam5", "nam7", "eur3"})
FIRESTORE_LOCATIONS: frozenset[str] = CLOUD_RUN_REGIONS | {"northamerica-south1"} | FIRESTORE_MULTI_REGIONS

#: Service -> (its locations, its locations page).
SERVICES: dict[str, tuple[frozenset[str], str]] = {
    "Cloud Scheduler": (CLOUD_SCHEDULER_REGIONS, "https://cloud.google.com/scheduler/docs/locations"),
    "Cloud Run": (CLOUD_RUN_REGIONS, "https://cloud.google.com/run/docs/locations"),
    "Firestore": (FIRESTORE_LOCATIONS, "https://cloud.google.com/firestore/docs/locations"),
}


def region_problem(location: str, services: tuple[str, ...]) -> str | None:
    """Why ``location`` cannot hold every one of ``services`` (names of :data:`SERVICES`), with the fix; None when
    each lists it.

    Names each service that lacks it and the nearest spelling that all of them have (:func:`difflib.get_close_matches`).
    """
    lacking = [name for name in services if location not in SERVICES[name][0]]
    if not lacking:
        return None
    everywhere = set.intersection(*(set(SERVICES[name][0]) for name in services))
    close = difflib.get_close_matches(location, sorted(everywhere), n=1, cutoff=0.6)
    known = any(location in places for places, _ in SERVICES.values())
    what = (f"{' and '.join(lacking)} {'is' if len(lacking) == 1 else 'are'} not offered in {location!r}" if known else
            f"{location!r} is not a location of {' or '.join(lacking)}")
    pages = ", ".join(SERVICES[name][1] for name in lacking)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (f"{what} (their published locations as of {AS_OF}: {pages}): {hint}use a location every one of "
            f"{', '.join(services)} lists, e.g. 'us-central1' or 'europe-west1'")
