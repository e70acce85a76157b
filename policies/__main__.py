"""Entry point of the ``scheduler-dedup`` policy pack: ``pulumi preview --policy-pack policies``.

Pulumi runs this file with the pack's virtual environment (see PulumiPolicy.yaml and requirements.txt);
``PolicyPack(...)`` starts the analyzer server and blocks, so nothing may follow it.
"""

from pulumi_policy import PolicyPack

from scheduler_dedup.policies.pack import PACK_NAME, build_policies

PolicyPack(name=PACK_NAME, policies=build_policies())
