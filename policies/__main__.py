"""Entry point of the ``scheduler-dedup`` policy pack: ``pulumi preview --policy-pack policies``.

Pulumi runs this file with the pack's virtual environment (see PulumiPolicy.yaml and requirements.txt);
``PolicyPack(...)`` starts the analyzer server, prints its port for the engine to read and blocks, so nothing may
follow it. Run by hand (``-h``/``--help``, or with a terminal as output, which the engine never gives it), it says
how to use the pack instead of waiting for an engine that never comes.
"""

import sys

_USAGE = """\
The scheduler-dedup policy pack: Pulumi starts it, and it waits for Pulumi's engine.

  pulumi preview --policy-pack policies                       # with the Pulumi CLI, at the repository root
  pulumi preview --policy-pack policies --policy-pack-config policy-config.json
  scheduler-dedup check --stack dev                           # without the CLI: the same rules, offline

Rules and levels: docs/reference/policy-rules.md.
"""

if any(arg in ("-h", "--help") for arg in sys.argv[1:]) or getattr(sys.stdout, "isatty", lambda: False)() is True:
    print(_USAGE, end="")
    sys.exit(0)

from pulumi_policy import PolicyPack  # noqa: E402  (after the usage check: importing it starts nothing, serving does)

from scheduler_dedup.policies.pack import PACK_NAME, build_policies  # noqa: E402

PolicyPack(name=PACK_NAME, policies=build_policies())
