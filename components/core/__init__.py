"""Pure facts and helpers every other room builds on (no Pulumi, no AWS calls).

- :mod:`~kimi_k3.core.catalog`: instance types, the model's footprint, pinned versions and prices;
- :mod:`~kimi_k3.core.formats`: the formats AWS and Kubernetes accept (ids, ARNs, names), checked in one place;
- :mod:`~kimi_k3.core.labels`: node labels and taints shared by the node groups, plugins and serving pods;
- :mod:`~kimi_k3.core.clock`: the moment a program runs (the only module that reads the wall clock);
- :mod:`~kimi_k3.core.human_time`: durations and moments as every command prints them;
- :mod:`~kimi_k3.core.suggest`: the "did you mean" of a misspelt name, in any case;
- :mod:`~kimi_k3.core.lazy_exports`: package attributes imported on first use.
"""
