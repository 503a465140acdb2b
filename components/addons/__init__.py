"""Cluster add-ons installed from their official Helm charts, and what their releases share.

- :mod:`~kimi_k3.addons.gpu_plugins`: NVIDIA and EFA device plugins, DCGM exporter;
- :mod:`~kimi_k3.addons.load_balancer_controller`: the AWS Load Balancer Controller (Pod Identity);
- :mod:`~kimi_k3.addons.lws_controller`: the LeaderWorkerSet controller;
- :mod:`~kimi_k3.addons.releases`, :mod:`~kimi_k3.addons.helm_values`, :mod:`~kimi_k3.addons.image_registries`:
  the release options, values handling and EKS add-on registries they share.
"""
