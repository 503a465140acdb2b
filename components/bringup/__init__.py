"""``kimi-k3 status`` and ``kimi-k3 verify``: the bring-up of a stack as an operator watches and checks it.

* :mod:`.pods` — each serving pod's phase from its API object and log tail (pure);
* :mod:`.nodes` — the GPU nodes joined / Ready / GPUs allocatable (pure);
* :mod:`.report` — the whole picture (block, extension, scale-down, nodes, pods, endpoint),
  as JSON for machines and as lines with progress bars for people (pure);
* :mod:`.kube` — the Kubernetes API reads, through the stack's kubeconfig (official client);
* :mod:`.collect` — one snapshot: the AWS reads (boto3) and the cluster reads together;
* :mod:`.verify` — ``kimi-k3 verify``'s checks of a live OpenAI-compatible endpoint (operator-time code, moved here
  from ``serving/`` once: no pod runs it, and the pod module paths are unchanged).

The pods' staging steps report progress as :mod:`kimi_k3.weights.progress` lines.
"""
