"""Map validated stack settings onto the serving contracts.

Pure: no Pulumi, no I/O. The composition (``platform.py``) and the CLI commands
that render serving objects outside a Pulumi run (``kimi-k3 hyperpod``) build the
same :class:`~components.serving.contracts.ServingContract` from the same
:class:`~components.settings.StackSettings`, so both paths serve the same model,
revision, image and engine flags.
"""

from __future__ import annotations

from components.serving.contracts import ApiContract, EngineProfile, ImageContract, ServingContract, WeightsContract
from components.settings import StackSettings


def serving_contract(settings: StackSettings) -> ServingContract:
    """The serving contract a stack's settings describe.

    :param settings: validated stack settings (``components.settings.load_stack`` /
        ``from_pulumi``).
    :raises components.errors.UserError: when the settings combine into a contract
        that cannot work (the contracts re-check their own fields).
    """
    s = settings.serving
    return ServingContract(
        image=ImageContract(s.image),
        weights=WeightsContract(
            model_id=s.model_id,
            revision=s.model_revision,
            source=s.weights_source,
            s3_uri=s.weights_s3_uri,
            sha256_manifest=s.weights_sha256_manifest,
        ),
        api=ApiContract(),
        engine=EngineProfile(
            tensor_parallel_size=s.tensor_parallel_size,
            pipeline_parallel_size=s.pipeline_parallel_size,
            gpu_memory_utilization=s.gpu_memory_utilization,
            max_model_len=s.max_model_len,
            kv_cache_dtype=s.kv_cache_dtype,
            extra_args=tuple(s.extra_args),
            ready_timeout_s=s.engine_ready_timeout_s,
        ),
    )
