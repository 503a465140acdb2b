"""Read the shards in manifest order as the sync verifies each one (issue 34: start the engine while the weights arrive).

The node sync (:data:`kimi_k3.weights.node_sync.NODE_SYNC_SCRIPT`) writes one marker per verified shard under
:data:`~kimi_k3.weights.node_sync.SHARD_MARKERS`, named by the shard's line in the manifest, and the whole-manifest
marker last. :func:`verified_shards` yields each shard's path in manifest order once its marker is there (all at once
when the whole-manifest marker holds already, a re-created pod or a restarted container), so a loader can copy shard
*n* to the GPUs while shard *n+1* is still in transfer. A shard the sync reports as failed, or a wait longer than
``timeout_s``, raises: the engine exits and the kubelet restarts it, as with any failed load.

vLLM 0.27.1's own loaders list the shards when the load starts (``DefaultModelLoader._prepare_weights``), so the engine
uses a loader of ours, :mod:`kimi_k3.weights.vllm_loader` (``--load-format kimi_k3_pipelined``, registered through vLLM's
``vllm.general_plugins`` entry points): it hands :func:`verified_groups` to vLLM's own per-format iterators. Before the
engine starts, the files it reads at start-up (``config.json``, the tokenizer, remote code: every manifest entry that is
not a ``.safetensors`` shard) must be verified: :func:`engine_files_ready`, which the engine container's start polls
(``python3 -m kimi_k3.weights.pipelined_load engine-files-ready DIR MANIFEST``).

Standard library only (``safetensors`` is imported by :func:`safetensors_in_order`, in the engine image).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator

from kimi_k3.weights import WeightsError

WAIT_LOG = "pipelined load: waited {seconds:.1f} s for {shards} shards still in transfer"
"""The line the loader prints when done (``kimi-k3 startup-report`` reads it as the pipelined load's tail)."""
SHARD_MARKERS = ".kimi-k3-shards"
"""Same as :data:`kimi_k3.weights.node_sync.SHARD_MARKERS` (kept here: this module runs in the engine, without the stack's)."""
WEIGHTS_MARKER = ".kimi-k3-verified"
"""Same as :data:`kimi_k3.weights.node_sync.WEIGHTS_MARKER`."""


def manifest_files(manifest_text: str) -> list[str]:
    """The file names of a ``sha256sum`` manifest, in its order (the sync's marker names are these lines, from 1)."""
    names = []
    for line in manifest_text.splitlines():
        if line.strip():
            names.append(line.split(" ", 1)[1].lstrip(" *"))
    return names


def verified_shards(weights_dir: str, manifest: str = "SHA256SUMS", *, timeout_s: float = 3600.0, poll_s: float = 0.5,
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                    log: Callable[[str], None] = print) -> Iterator[str]:
    """Paths of the ``.safetensors`` shards of ``weights_dir`` in manifest order, each once the sync has verified it."""
    with open(os.path.join(weights_dir, manifest)) as fh:
        names = manifest_files(fh.read())
    markers = os.path.join(weights_dir, SHARD_MARKERS)
    start = clock()
    waited = 0.0
    late = 0
    for n, name in enumerate(names, start=1):
        marker = os.path.join(markers, str(n))
        began = clock()
        while not (os.path.exists(os.path.join(weights_dir, WEIGHTS_MARKER)) or os.path.exists(marker)):
            if clock() - start > timeout_s:
                raise WeightsError(f"pipelined load: shard {n} ({name}) not verified after {timeout_s:g} s; the sync's log says why")
            sleep(poll_s)
        if clock() > began:
            late += 1
            waited += clock() - began
        if name.endswith(".safetensors"):
            yield os.path.join(weights_dir, name)
    log(WAIT_LOG.format(seconds=waited, shards=late))


def verified_groups(weights_dir: str, size: int = 1, manifest: str = "SHA256SUMS", **wait) -> Iterator[list[str]]:
    """:func:`verified_shards` in groups of ``size`` (the last may be shorter), each once all of it is verified.

    The groups depend on the manifest only, never on when a marker appeared, so every tensor-parallel rank calls a
    collective reader (fastsafetensors' ``ParallelLoader`` spreads a call's files over the ranks) with the same files."""
    if size < 1:
        raise WeightsError(f"pipelined load: group size {size} is not accepted; accepted: 1 or more")
    group: list[str] = []
    for path in verified_shards(weights_dir, manifest, **wait):
        group.append(path)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def engine_files_ready(weights_dir: str, manifest: str = "SHA256SUMS") -> bool:
    """True once the engine may start beside the sync: the manifest is on the node and every entry that is not a
    ``.safetensors`` shard (config, tokenizer, remote code, the index) is verified, or the whole manifest is."""
    if os.path.exists(os.path.join(weights_dir, WEIGHTS_MARKER)):
        return True
    try:
        with open(os.path.join(weights_dir, manifest)) as fh:
            names = manifest_files(fh.read())
    except FileNotFoundError:
        return False
    markers = os.path.join(weights_dir, SHARD_MARKERS)
    return all(os.path.exists(os.path.join(markers, str(n))) for n, name in enumerate(names, start=1) if not name.endswith(".safetensors"))


def main(argv: list[str]) -> int:
    """``engine-files-ready DIR MANIFEST``: exit 0 when :func:`engine_files_ready`, else 1 (the engine's start polls it)."""
    if len(argv) != 3 or argv[0] != "engine-files-ready":
        print("usage: python3 -m kimi_k3.weights.pipelined_load engine-files-ready WEIGHTS_DIR MANIFEST", file=sys.stderr)
        return 2
    return 0 if engine_files_ready(argv[1], argv[2]) else 1


def safetensors_in_order(weights_dir: str, device: str = "cpu", **wait) -> Iterator[tuple[str, object]]:
    """``(name, tensor)`` of every shard in manifest order as each is verified (for a loader's ``model.load_weights``)."""
    from safetensors import safe_open  # in the engine image

    for path in verified_shards(weights_dir, **wait):
        with safe_open(path, framework="pt", device=device) as f:
            for key in f.keys():  # noqa: SIM118  # safe_open has no __iter__
                yield key, f.get_tensor(key)


__all__ = [
    "SHARD_MARKERS", "WAIT_LOG", "WEIGHTS_MARKER", "engine_files_ready", "main", "manifest_files", "safetensors_in_order", "verified_groups",
    "verified_shards",
]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
