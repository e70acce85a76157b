"""Text a job supplied, made safe to store in Firestore, answer in JSON and log.

A Python ``str`` can hold characters UTF-8 cannot encode: lone surrogates, which ``os.listdir``,
``os.environ`` and ``sys.argv`` produce for undecodable bytes (PEP 383 ``surrogateescape``). Firestore
stores UTF-8 strings only (https://firebase.google.com/docs/firestore/manage-data/data-types), and an
exception's ``__str__`` is user code that may itself raise. Error text therefore goes through
:func:`exception_text` before it is recorded, answered or logged.
"""

from __future__ import annotations


def utf8_safe(text: str) -> str:
    """``text`` with each character UTF-8 cannot encode (a lone surrogate) replaced by its ``\\uXXXX`` escape.

    Text that encodes already is returned unchanged.
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def is_utf8(text: str) -> bool:
    """True when ``text`` encodes as UTF-8 (holds no lone surrogate), as Firestore and strict JSON need."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def exception_text(exc: BaseException, limit: int) -> str:
    """``"<ExceptionType>: <message>"`` for ``exc``, UTF-8 encodable, at most ``limit`` characters.

    Never raises: an exception whose ``__str__`` raises is described by its type and that failure.
    """
    try:
        message = str(exc)
    except Exception as failure:  # the exception's own __str__ is user code
        message = f"<its message could not be read: {type(failure).__name__}>"
    return utf8_safe(f"{type(exc).__name__}: {message}")[:limit]
