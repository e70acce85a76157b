"""The executions the handler reads and cancels are its own target's, whatever a run record names: a record is data
anyone with write access to the collection can forge, so a name from it never becomes a URL path of its own. Over
real HTTP against the local fake of the Cloud Run Admin, Workflows and Cloud Build APIs (:mod:`.fake_google`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from scheduler_dedup.handler.targets.call import TargetRetryableError
from scheduler_dedup.handler.targets.executions import ExecutionApi, reusable
from scheduler_dedup.handler.targets.settings import TargetSettings

from .fake_google import FakeGoogle

TARGETS = {"cloud_run_job": "projects/p1/locations/us-central1/jobs/export",
           "workflows": "projects/p1/locations/us-central1/workflows/nightly",
           "cloud_build_trigger": "projects/p1/locations/us-central1/triggers/deploy"}
#: Per target type: names a forged record may hold that are not an execution of the target.
FOREIGN = {
    "cloud_run_job": ["projects/other/locations/us-central1/jobs/export/executions/e-1",
                      "projects/p1/locations/us-central1/jobs/payroll/executions/e-1",
                      "projects/p1/locations/europe-west1/jobs/export/executions/e-1",
                      "projects/p1/locations/us-central1/jobs/export/executions/../../payroll/executions/e-1",
                      "projects/p1/locations/us-central1/jobs/export/executions/e-1?alt=media",
                      "projects/p1/locations/us-central1/jobs/export/executions/e-1/../e-2",
                      "projects/p1/locations/us-central1/jobs/export/executions/e%2F1"],
    "workflows": ["projects/other/locations/us-central1/workflows/nightly/executions/x-1",
                  "projects/p1/locations/us-central1/workflows/payroll/executions/x-1",
                  "projects/p1/locations/us-central1/workflows/nightly/executions/x-1#frag",
                  "projects/p1/locations/us-central1/jobs/nightly/executions/x-1"],
    "cloud_build_trigger": ["projects/other/locations/us-central1/builds/b-1",
                            "projects/p1/locations/europe-west1/builds/b-1",
                            "../../other/locations/us-central1/builds/b-1",
                            "b-1/../../../../other/locations/us-central1/builds/b-1",
                            "projects/p1/builds/b-1:cancel"],
}


@pytest.fixture()
def fake() -> Iterator[FakeGoogle]:
    server = FakeGoogle().start()
    yield server
    server.stop()


def api(fake: FakeGoogle, kind: str) -> ExecutionApi:
    settings = TargetSettings(type=kind, target=TARGETS[kind], run_api=fake.url, workflows_api=fake.url,
                              cloud_build_api=fake.url, auth="none", timeout_seconds=5)
    return ExecutionApi(settings, requests.Session())


def _foreign_execution(fake: FakeGoogle, kind: str, name: str) -> None:
    """Put an execution the fake answers for at ``name`` (when its form is one the fake routes)."""
    body = {"name": name, "state": "ACTIVE", "status": "WORKING", "id": name.rsplit("/", 1)[-1]}
    fake.executions(kind).append(body)


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in FOREIGN.items() for n in names])
def test_a_name_that_is_not_an_execution_of_the_target_is_never_called(fake: FakeGoogle, kind: str, name: str) -> None:
    _foreign_execution(fake, kind, name)
    control = api(fake, kind)
    with pytest.raises(TargetRetryableError, match="not an execution of"):
        control.state(name)
    with pytest.raises(TargetRetryableError, match="not an execution of"):
        control.cancel(name)
    assert fake.requests == []  # neither a get nor a cancel left the handler


@pytest.mark.parametrize("kind", list(TARGETS))
def test_an_answer_naming_another_execution_is_not_believed(fake: FakeGoogle, kind: str) -> None:
    """The API (or whoever answers its URL) returns an execution of another job under the name asked for: its state
    is not the run's, so it is refused as an answer that tells nothing."""
    own = {"cloud_run_job": f"{TARGETS['cloud_run_job']}/executions/e-1",
           "workflows": f"{TARGETS['workflows']}/executions/x-1",
           "cloud_build_trigger": "projects/p1/locations/us-central1/builds/b-1"}[kind]
    ended = {"name": own, "state": "SUCCEEDED", "status": "SUCCESS", "id": "b-1",
             "completionTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:00Z",
             "finishTime": "2026-01-01T00:00:00Z",
             "conditions": [{"type": "Completed", "state": "CONDITION_SUCCEEDED"}]}
    fake.executions(kind).append(ended)
    assert api(fake, kind).state(own).ending == "completed"  # its own: believed
    # the same URL now answers with another project's execution
    fake.answered_instead[own] = {**ended, "name": own.replace("/p1/", "/other/"), "id": "b-2"}
    with pytest.raises(TargetRetryableError, match="answered for"):
        api(fake, kind).state(own)


#: Bodies an API (or whatever answers its URL) may send that are JSON objects of the wrong shape.
_ODD_FIELDS: list[dict[str, object]] = [
    {"error": "boom", "state": "FAILED"}, {"error": ["x"], "state": "FAILED"}, {"error": {"payload": {"a": 1}}},
    {"cancelledCount": "many", "completionTime": "2026-01-01T00:00:00Z"},
    {"failedCount": {"n": 1}, "completionTime": "2026-01-01T00:00:00Z"},
    {"failedCount": 1.5, "completionTime": "2026-01-01T00:00:00Z"},
    {"conditions": "Completed", "completionTime": "2026-01-01T00:00:00Z"},
    {"conditions": [{"type": "Completed", "reason": ["Cancelled"]}], "completionTime": 5},
    {"status": ["FAILURE"], "statusDetail": {"x": 1}}, {"state": None, "startTime": {"seconds": 1}},
    {"completionTime": "not a time"}, {"startTime": "2026-13-45T99:00:00Z"},
]


@pytest.mark.parametrize("kind", list(TARGETS))
@pytest.mark.parametrize("odd", _ODD_FIELDS)
def test_an_answer_of_the_wrong_shape_is_read_without_raising(kind: str, odd: dict[str, object]) -> None:
    """An execution's fields parse totally: an odd type is a field not given, never an exception out of the
    target's existence check (which calls :func:`reusable` on every listed execution) or of a state read."""
    assert reusable(kind, dict(odd)) in (True, False)
