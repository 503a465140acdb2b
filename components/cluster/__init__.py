"""The EKS cluster and who reaches it: the control plane, access entries, node roles, Pod Identity, the Kubernetes provider.

- :mod:`~kimi_k3.cluster.eks`: :class:`~kimi_k3.cluster.eks.Cluster` (control plane, system nodes, managed add-ons);
- :mod:`~kimi_k3.cluster.access`: admin and viewer access, the role the deployment's provider assumes (pure rules);
- :mod:`~kimi_k3.cluster.node_role`: the IAM role of managed nodes;
- :mod:`~kimi_k3.cluster.pod_identity`: one ServiceAccount, one IAM role;
- :mod:`~kimi_k3.cluster.kubernetes_provider`: the one way a component is told which cluster to install into.
"""
