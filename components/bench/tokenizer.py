"""An offline tokenizer for AIPerf: one token per word of AIPerf's own prompt corpus.

AIPerf needs a Hugging Face tokenizer to build prompts of a given length. Its
``builtin`` tokenizer downloads tiktoken's ``o200k_base`` file on first use
(seen: ``openaipublic.blob.core.windows.net`` unreachable → the run fails),
and Kimi K3's own tokenizer is remote code in the model repository. So
``kimi-k3 bench`` writes a word-level ``tokenizer.json`` at run time whose
vocabulary is every word of the corpus AIPerf samples prompts from
(``aiperf/dataset/generator/assets/shakespeare.txt``): a prompt of N tokens
is N words. The server's own count (``usage.prompt_tokens``) is what
bench.json reports as served prompt tokens; a BPE tokenizer such as Kimi's
counts roughly 1.3 tokens per English word, so served prompts run longer
than the profile's numbers by about that factor.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

UNKNOWN_WORD = "the"
"""What a word outside the vocabulary encodes to. AIPerf tokenizes its corpus in
fixed-size character chunks, so a word cut at a chunk edge is unknown; mapping it
to a real word keeps the prompt plain text instead of ``[UNK]`` markers."""

CORPUS_PACKAGE = "aiperf.dataset.generator"
CORPUS_FILE = "assets/shakespeare.txt"
"""AIPerf's default prompt corpus (``aiperf.dataset.generator.prompt.DEFAULT_CORPUS_FILE``)."""


def corpus_words() -> list[str]:
    """The distinct whitespace-separated words of AIPerf's prompt corpus, sorted."""
    text = resources.files(CORPUS_PACKAGE).joinpath(CORPUS_FILE).read_text(encoding="utf-8")
    return sorted(set(text.split()) | {UNKNOWN_WORD})


def write_word_tokenizer(directory: Path) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``; return it.

    The same AIPerf release always yields byte-identical files (sorted vocabulary).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {word: index for index, word in enumerate(corpus_words())}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNKNOWN_WORD))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins tokens with single spaces
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNKNOWN_WORD, "model_max_length": 10**7}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return directory
