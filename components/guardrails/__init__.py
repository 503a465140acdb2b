"""The ``kimi-k3-guardrails`` policy pack's rules and the verdict ``kimi-k3 plan`` reaches with them.

- :mod:`~kimi_k3.guardrails.rules`: the rules (one home: ``policy/`` and the plan both run them);
- :mod:`~kimi_k3.guardrails.verdict`: the verdict on an offline plan, reached as ``pulumi preview --policy-pack`` reaches it.
"""
