"""The VPC: :class:`~kimi_k3.network.vpc.Network` (or an existing VPC), its subnet layout and its endpoints.

- :mod:`~kimi_k3.network.vpc`: the component;
- :mod:`~kimi_k3.network.subnets`: how a VPC is carved into subnets (the one home of the layout rule, pure);
- :mod:`~kimi_k3.network.endpoints`: the VPC interface endpoints a stack may create (pure).
"""
