"""The weights claim template stays the same across ordinary changes (issue 21, point 5).

``volumeClaimTemplates`` is immutable (kubernetes/kubernetes ``ValidateStatefulSetUpdate``), so
pulumi-kubernetes replaces the StatefulSet on any change to it, and with retention ``Delete``
and reclaim ``Delete`` that wipes the weights on every node. The claim's size is therefore a
fixed figure: a new weights size (a catalog update, another revision) leaves the claim, and
the set, alone. Where the claim must change, the change review refuses it while the block
serves (tests/test_change_review.py, the claim-template rehearsal).
"""

from __future__ import annotations

from kimi_k3.core import catalog
from kimi_k3.offline.diff import REPLACE
from kimi_k3.offline.review import review
from kimi_k3.weights import node_local
from tests.review_runs import SERVING, prod_serving, run

PROGRAM = '''"""prod with another weights size, as a catalog update would give it."""
import dataclasses

import pulumi

from kimi_k3.core import clock
from kimi_k3.stack import settings as stack_settings
from kimi_k3.stack.platform import Platform

settings = stack_settings.from_pulumi()
contract = settings.serving.contract
contract = dataclasses.replace(contract, weights=dataclasses.replace(contract.weights, expected_size_gb=2400))
settings = dataclasses.replace(settings, serving=dataclasses.replace(settings.serving, contract=contract))
platform = Platform("kimi-k3", settings, now=clock.program_now())
for name, value in platform.stack_outputs().items():
    pulumi.export(name, value)
'''


def test_a_new_weights_size_leaves_the_claim_template_and_the_stateful_set_alone(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(PROGRAM)
    previous = prod_serving()
    result = run("prod", SERVING, "active", previous, program=program)
    assert result.settings is not None
    (workload,) = [m for m in result.kubernetes_objects() if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "kimi-k3-serving"]
    (claim,) = workload["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == f"{node_local.WEIGHTS_CLAIM_GB}G"
    changes = review(previous, result).changes
    (change,) = changes.of_type("kubernetes:apps/v1:StatefulSet")
    assert change.action != REPLACE and not change.touches("spec.volumeClaimTemplates")


def test_the_fixed_claim_fits_the_local_volume_of_every_supported_instance_type():
    # a local PersistentVolume is the node's whole RAID0: the claim's request only has to be at most that
    assert all(facts.nvme_gb >= node_local.WEIGHTS_CLAIM_GB for facts in catalog.INSTANCE_TYPES.values())
    assert node_local.weights_claim_template("kimi-local-weights").spec.resources.requests == {"storage": f"{node_local.WEIGHTS_CLAIM_GB}G"}
