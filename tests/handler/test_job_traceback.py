"""A failing job's traceback as the record keeps it (handler/core/job_traceback.py): the job's own frames first
with their source lines, the frames of libraries and Python under them counted, credentials scrubbed, bounded."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from scheduler_dedup.handler.core.job_traceback import MAX_TRACEBACK_CHARS, is_job_frame, job_traceback

pytestmark = pytest.mark.unit

JOB = '''
import json

def run(depth=0):
    if depth < DEPTH:
        return run(depth + 1)
    return json.loads("[1]", object_hook=None, parse_int=explode)

def explode(text):
    token = "ya29.a0AfH6SMBx-secretvalue"  # password=hunter2
    raise ValueError(f"cannot export with token={token}")
'''


def _job(tmp_path: Path, depth: int) -> ModuleType:
    path = tmp_path / "myjob.py"
    path.write_text(JOB.replace("DEPTH", str(depth)))
    spec = importlib.util.spec_from_file_location("myjob", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _failure(tmp_path: Path, depth: int) -> BaseException:
    with pytest.raises(ValueError) as caught:
        _job(tmp_path, depth).run()
    return caught.value


def test_the_jobs_own_frames_come_first_with_their_lines(tmp_path: Path) -> None:
    text = job_traceback(_failure(tmp_path, 0))
    job = str(tmp_path / "myjob.py")
    assert text.startswith("Traceback (the job's own frames first, most recent call last):\n"), text
    assert f'File "{job}", line 7, in run\n    return json.loads(' in text, text
    assert f'File "{job}", line 11, in explode\n    raise ValueError(' in text, text
    # json's decoder ran between the two frames of the job: counted after them, not in between
    under = text.index("frame(s) of the handler, libraries and Python")
    assert text.index("in explode") < under and "decoder.py" in text[under:], text
    assert text.endswith("ValueError: cannot export with token=[redacted]"), text


def test_credentials_in_source_lines_and_messages_are_scrubbed(tmp_path: Path) -> None:
    text = job_traceback(_failure(tmp_path, 0))
    assert "secretvalue" not in text and "hunter2" not in text and "[redacted]" in text, text


def test_a_deep_traceback_is_bounded_and_keeps_the_innermost_frames_and_the_exception(tmp_path: Path) -> None:
    text = job_traceback(_failure(tmp_path, 200))
    assert len(text) <= MAX_TRACEBACK_CHARS, len(text)
    assert "in explode" in text and text.endswith("token=[redacted]"), text
    assert text.count("in run\n") <= 8


def test_which_frames_are_the_jobs() -> None:
    assert not is_job_frame(job_traceback.__code__.co_filename)  # the handler's own package
    assert not is_job_frame(sys.modules["json"].__file__ or "")  # the standard library
    assert not is_job_frame("/srv/.venv/lib/python3.11/site-packages/requests/api.py")
    assert not is_job_frame("<string>")
    assert is_job_frame("/workspace/jobs/nightly.py")
