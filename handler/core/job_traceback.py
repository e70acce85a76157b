"""A failing job's traceback as the run record, the answer and the local tools keep it: the job's own frames first
(with their source lines), then how many frames of the handler, libraries and Python were under them, then the
exception; scrubbed of credentials (:func:`~scheduler_dedup.handler.core.safe_text.exception_text`,
:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`) and at most :data:`MAX_TRACEBACK_CHARS` long.

A frame is the job's own unless its file is under the handler's package, a ``site-packages`` or ``dist-packages``
folder, or Python's standard library (:func:`is_job_frame`).
"""

from __future__ import annotations

import sysconfig
import traceback
from functools import lru_cache
from pathlib import Path

from scheduler_dedup.handler.core.safe_text import exception_text, scrub_secrets, utf8_safe

#: Longest traceback kept, characters (beside the output tail the record keeps; all three stores hold it).
MAX_TRACEBACK_CHARS = 1500
#: The job's own frames shown (the innermost), and the other frames named by file and line (the innermost).
OWN_FRAMES, OTHER_FRAMES = 8, 4
#: The first line of a traceback, where it starts in an output tail (:func:`split_output`).
TRACEBACK_HEAD = "Traceback (the job's own frames first, most recent call last):"
#: A source line shown, characters at most.
_LINE_CHARS = 160


@lru_cache(maxsize=1)
def _not_the_job() -> tuple[str, ...]:
    handler = str(Path(__file__).resolve().parents[1])  # the handler package
    paths = sysconfig.get_paths()
    return tuple({handler, *(str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib") if k in paths)})


def is_job_frame(filename: str) -> bool:
    """Whether a frame's ``filename`` is the job's own code: not the handler's package, not an installed library
    (``site-packages``, ``dist-packages``), not Python's standard library, and a real file (not ``<string>``)."""
    if filename.startswith("<"):
        return False
    path = Path(filename)
    if "site-packages" in path.parts or "dist-packages" in path.parts:
        return False
    try:
        resolved = str(path.resolve())
    except OSError:
        resolved = filename
    return not any(resolved == root or resolved.startswith(root + "/") for root in _not_the_job())


def job_traceback(exc: BaseException, limit: int = MAX_TRACEBACK_CHARS) -> str:
    """``exc``'s traceback: the job's frames, innermost last (at most :data:`OWN_FRAMES`, each with its source
    line), then the other frames under them in one line, then ``Type: message``; at most ``limit`` characters (the
    exception's line is kept whole, the frames cut from the outermost). Never raises."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:  # noqa: BLE001 - a traceback is a courtesy: never a reason to lose the outcome
        frames = traceback.StackSummary()
    own = [frame for frame in frames if is_job_frame(frame.filename)]
    other = [frame for frame in frames if not is_job_frame(frame.filename)]
    lines = []
    for frame in own[-OWN_FRAMES:]:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()[:_LINE_CHARS]}")
    if not own:
        lines.append("  (no frame of the job's own code: it failed in the handler, a library or Python)")
    if other:
        named = ", ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in other[-OTHER_FRAMES:])
        lines.append(f"  under {len(other)} frame(s) of the handler, libraries and Python (innermost: {named})")
    head = TRACEBACK_HEAD
    last = exception_text(exc, limit // 3)
    body = scrub_secrets(utf8_safe("\n".join(lines)))
    room = limit - len(head) - len(last) - 2
    if len(body) > room:
        body = "  ...\n" + body[len(body) - max(room - 6, 0):]
    return f"{head}\n{body}\n{last}"


def split_output(output: str | None) -> tuple[str | None, str | None]:
    """An output tail as recorded and answered, split into what the job wrote and the traceback that ends it
    (:func:`job_traceback`); either is None when absent."""
    if not output:
        return None, None
    at = output.rfind(TRACEBACK_HEAD)
    if at < 0:
        return output, None
    return output[:at].removesuffix("\n") or None, output[at:]
