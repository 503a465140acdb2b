"""EC2 Capacity Blocks: one record, one assessment, and the AWS operations around them.

- :mod:`~kimi_k3.capacity.facts`: :class:`~kimi_k3.capacity.facts.CapacityBlockFacts`,
  the one record of a block, mapped from the Pulumi invoke and from boto3 alike;
- :mod:`~kimi_k3.capacity.assessment`: :func:`~kimi_k3.capacity.assessment.assess`, the
  one list of findings (level, code, message) about a block against what a caller needs, which
  ``Platform`` raises or warns on, ``CapacityBlockNodeGroup`` uses when it looked the block up
  itself, and ``kimi-k3 capacity preflight`` prints;
- :mod:`~kimi_k3.capacity.lookup`: the block read through the AWS provider at preview time;
- the boto3 operations of the ``kimi-k3 capacity`` commands: :mod:`~kimi_k3.capacity.aws`
  (clients, one-line AWS errors, id formats), :mod:`~kimi_k3.capacity.offerings` (durations,
  the offering search, the purchase), :mod:`~kimi_k3.capacity.status` (reservations and block
  health) and :mod:`~kimi_k3.capacity.preflight` (the go/no-go list).

Nothing here is imported by this package's ``__init__``: the Pulumi look-up pulls in the AWS
provider, the boto3 modules botocore; each caller imports only what it uses.
"""
