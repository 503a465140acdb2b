"""``kimi-k3 bench``'s pieces: length profiles, the offline tokenizer, the AIPerf run, the report.

Nothing here is imported by the rest of the library; ``kimi_k3.cli.bench``
loads it only when ``kimi-k3 bench`` runs. Needs the ``bench`` extra.
"""
