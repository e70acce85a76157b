"""The form of a job's entry point, ``module:function``: one rule for the handler (``DEDUP_JOB``), the component
(``job``), the policy pack and ``run-local`` (``--job``).

A spec is a dotted module path and a function name, each part a Python identifier (``str.isidentifier``, so what
``importlib.import_module`` and ``getattr`` can name, non-ASCII letters included), joined by one ``:``. Whether the
module exists and binds the function is checked later, by importing it or by reading its source.
"""

from __future__ import annotations


def job_spec_problem(spec: str) -> str | None:
    """Why ``spec`` is not ``module:function`` (e.g. ``reports.nightly:run``), as a short phrase for a message
    (``"'reports..nightly' has an empty part between dots"``), or None when it is."""
    module, sep, function = spec.partition(":")
    if not sep:
        return "no ':' between module and function"
    if ":" in function:
        return "more than one ':'"
    if not module:
        return "no module before ':'"
    if not function:
        return "no function after ':'"
    for part in module.split("."):
        if not part:
            return f"{module!r} has an empty part between dots"
        if not part.isidentifier():
            return f"{part!r} of the module is not a Python identifier"
    if not function.isidentifier():
        return f"{function!r} is not a Python identifier"
    return None
