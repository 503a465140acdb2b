"""Time to serve: stage the weights once, sync them to the node at line rate, keep caches warm.

Two kinds of modules live here:

* code that also runs **inside pods** (the staging Job, the cache init/sidecar containers),
  shipped to them as files of a ConfigMap: :mod:`.manifest`, :mod:`.hub`, :mod:`.s3store`,
  :mod:`.stage`, :mod:`.status`, :mod:`.compile_cache`, :mod:`.warmup`, the engine snapshot's
  :mod:`.engine_snapshot`, :mod:`.snapshot_pod` and :mod:`.snapshot_agent_loop`, :mod:`.podmain`, and in the engine
  container :mod:`.pipelined_load` with the vLLM loader plugin :mod:`.vllm_loader`, and the peer path's wrapper
  :mod:`.peer_transfer` (ModelExpress over EFA).
  They import only the standard library and boto3 (present in the vLLM image), never Pulumi;
  :data:`POD_MODULES` lists them;
* pure builders for the stack (IAM policies, the staging Job, the node sync script and the engine
  snapshot's S3 copier beside it, :mod:`.snapshot_copy`, the image pre-pull DaemonSet, node-local
  storage, the start-up estimate), which may import Pulumi.

Errors raised by the pod-side code are :class:`WeightsError`; the CLI turns them into one line.
See ``docs/weights.md`` for the design and its sources.
"""

from __future__ import annotations


class WeightsError(Exception):
    """A staging, sync or cache operation that cannot go on (bad input, corrupt data, AWS refusal)."""


POD_MODULES = ("manifest", "hub", "s3store", "stage", "status", "compile_cache", "warmup", "engine_snapshot", "snapshot_pod", "snapshot_agent_loop", "podmain", "pipelined_load", "vllm_loader", "peer_transfer")
"""Modules of this package that run inside pods (standard library + boto3 only)."""
