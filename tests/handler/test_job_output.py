"""A failing job's own words come back in the delivery answer and stay in its run record, over real HTTP on the real
emulator: its exception type and message (:func:`~scheduler_dedup.handler.core.safe_text.exception_text`) and the
tail of what it printed, scrubbed and bounded."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from scheduler_dedup.handler.core.job_traceback import MAX_TRACEBACK_CHARS, split_output
from scheduler_dedup.handler.protocol.job import OUTPUT_TAIL_CHARS

from .conftest import Harness, deliver, scheduler_headers
from .test_results import strict_json

T = "2026-10-16T12:00:00Z"


def test_a_retryable_failure_answers_its_exception_and_the_tail_of_its_output(harness: Harness) -> None:
    harness.plan("boom", fail="retryable", print="disk check: /data at 100% token=abc123secret")
    server = harness.server()
    body = strict_json(deliver(server.url, scheduler_headers("boom", T)))
    assert body["status"] == "released", body
    assert body["error"] == "RuntimeError: planned retryable failure of boom", body
    assert body["output"].count("disk check: /data at 100%") == 2, body  # stdout and stderr, in order
    assert "abc123secret" not in body["output"] and "[redacted]" in body["output"], body
    [record] = harness.records().values()
    assert record["status"] == "released" and record["error"] == body["error"], record
    assert record["output"] == body["output"] and record["releases"] == 1, record


def test_a_permanent_failure_and_an_exit_carry_the_output_too(harness: Harness) -> None:
    harness.plan("permanent", fail="permanent", print="giving up")
    harness.plan("exits", raise_python="system_exit_0", print="usage: job [-h]")
    server = harness.server()
    permanent = strict_json(deliver(server.url, scheduler_headers("permanent", T)))
    assert permanent["status"] == "failed" and "giving up" in permanent["output"], permanent
    exits = strict_json(deliver(server.url, scheduler_headers("exits", T)))
    assert exits["status"] == "failed" and exits["error"].startswith("JobExitedError: the job called sys.exit(0)"), exits
    assert "usage: job [-h]" in exits["output"], exits
    records = {r["job_name"]: r for r in harness.records().values()}
    assert records["permanent"]["output"] == permanent["output"] and records["exits"]["output"] == exits["output"]
    replay = strict_json(deliver(server.url, scheduler_headers("permanent", T)))  # a replay answers the same words
    assert replay["status"] == "failed" and replay["output"] == permanent["output"], replay


def test_the_output_is_bounded_and_concurrent_attempts_keep_their_own(harness: Harness) -> None:
    harness.plan("loud", fail="retryable", print="L" * (OUTPUT_TAIL_CHARS * 3), sleep=0.5)
    harness.plan("quiet", fail="retryable", print="only mine", sleep=0.5)
    server = harness.server()
    with ThreadPoolExecutor(2) as pool:
        loud, quiet = pool.map(lambda job: strict_json(deliver(server.url, scheduler_headers(job, T))),
                               ["loud", "quiet"])
    written, traceback = split_output(loud["output"])
    assert written is not None and traceback is not None and len(traceback) <= MAX_TRACEBACK_CHARS, loud
    assert len(written) <= OUTPUT_TAIL_CHARS + 60 and "earlier characters not kept" in written, loud
    assert "only mine" not in loud["output"], loud
    assert (split_output(quiet["output"])[0] or "").strip().splitlines() == ["only mine", "only mine"], quiet


def test_a_job_that_succeeds_answers_no_output(harness: Harness) -> None:
    harness.plan("fine", print="all good")
    server = harness.server()
    body = strict_json(deliver(server.url, scheduler_headers("fine", T)))
    assert body["status"] == "processed" and "output" not in body, body
