"""Entry point the Pulumi CLI runs for ``--policy-pack policy``.

Constructing ``PolicyPack`` starts the analyzer's gRPC server and blocks, so this
file does nothing else; the rules live in ``guardrails.py`` (tested directly).
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from guardrails import ALL_POLICIES, PACK_NAME

PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=ALL_POLICIES)
