"""One stack: its config schema and settings (the only reader of stack config), and the compositions that turn them into components.

- :mod:`~kimi_k3.stack.config_keys`: every ``kimi-k3:*`` key, its type, default and meaning;
- :mod:`~kimi_k3.stack.settings`: typed, validated settings read once from the stack's config, one module per section;
- :mod:`~kimi_k3.stack.seam`: which key feeds which component arg, and back (the one table between the two);
- :mod:`~kimi_k3.stack.project`: which Pulumi project and stack a command works on;
- :mod:`~kimi_k3.stack.stack_file`: the stack file read as Pulumi reads it; :mod:`~kimi_k3.stack.no_effect`: settings without effect;
  :mod:`~kimi_k3.stack.region_facts`: what the settings know of a region;
- :mod:`~kimi_k3.stack.platform`: the EKS composition (``Platform``); :mod:`~kimi_k3.stack.hyperpod`: the hyperpod one;
  :mod:`~kimi_k3.stack.foundation`: what both share; :mod:`~kimi_k3.stack.time_to_serve`, :mod:`~kimi_k3.stack.monitoring`:
  settings into the time-to-serve and monitoring args;
- :mod:`~kimi_k3.stack.terms`, :mod:`~kimi_k3.stack.lint`: config names for component findings, leftovers warned about.
"""
