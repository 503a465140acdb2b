"""Entry point the Pulumi CLI runs for ``--policy-pack policy``.

Constructing ``PolicyPack`` starts the analyzer's gRPC server and blocks, so this
file does nothing else. The rules live in the package (``kimi_k3.guardrails.rules``),
so the pack works with a regular (non-editable) install of kimi-k3-aws in
``../.venv``, and ``kimi-k3 plan`` runs exactly these rules offline.
"""

from pulumi_policy import Policy, PolicyPack

from kimi_k3.guardrails.rules import ALL_POLICIES, PACK_ENFORCEMENT_LEVEL, PACK_NAME

policies: list[Policy] = list(ALL_POLICIES)
PolicyPack(name=PACK_NAME, enforcement_level=PACK_ENFORCEMENT_LEVEL, policies=policies)
