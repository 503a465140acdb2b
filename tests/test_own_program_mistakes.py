"""The README's own program, mutated by the mistakes of ``tests/own_program_mistakes.py`` (issue 32, point 5): each stops
``kimi-k3 plan dev --program DIR`` with exit 2 and one line naming the argument, no traceback, nothing written.

The rows run in this process through :func:`kimi_k3.cli.main` (the command's own entry point and mock engine): about
a quarter of a second each, where a subprocess per row would cost seconds.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.own_program_mistakes import BEFORE, CLASSES, MISTAKES, plan_mutated, write_mutated


def test_the_table_has_forty_mistakes_or_more_over_every_class():
    per_class = Counter(m.kind for m in MISTAKES)
    assert sum(per_class.values()) >= 40 and set(per_class) == set(CLASSES), per_class
    assert all(count >= 4 for count in per_class.values()), per_class
    assert len({m.id for m in MISTAKES}) == len(MISTAKES)


def test_the_before_column_counts_every_row_of_its_class():
    assert {kind: sum(found.values()) for kind, found in BEFORE.items()} == dict(Counter(m.kind for m in MISTAKES))


def test_the_readme_program_itself_plans(tmp_path):
    outcome = plan_mutated(write_mutated(tmp_path / "my-llm", None))
    assert outcome.status == 0, outcome.err


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.id)
def test_each_mistake_stops_with_one_line_naming_the_argument(tmp_path, mistake):
    directory = write_mutated(tmp_path / "my-llm", mistake)
    outcome = plan_mutated(directory)
    assert outcome.status == 2, outcome.err
    assert "Traceback" not in outcome.err, outcome.err
    assert outcome.err.count("\n") == 1 and outcome.err.startswith("kimi-k3: error: "), outcome.err
    assert outcome.verdict(mistake.names) == "refused", outcome.err
    assert not (directory / "out").exists()  # nothing written


def test_a_str_where_a_sequence_is_expected_is_one_problem_not_one_per_character(tmp_path):
    for id in ("azs-a-string", "admins-a-string", "ingress-a-string"):
        mistake = next(m for m in MISTAKES if m.id == id)
        err = plan_mutated(write_mutated(tmp_path / id, mistake)).err
        assert "problems" not in err and "(str) is not accepted; expected a sequence of str (a list or tuple, not a str)" in err, err


def test_a_plain_text_secret_is_refused_with_the_fix_and_never_shown(tmp_path):
    for id, shown in (("api-key-plain-text", "sk-0123456789abcdef"), ("hf-token-plain-text", "hf_0123456789")):
        mistake = next(m for m in MISTAKES if m.id == id)
        err = plan_mutated(write_mutated(tmp_path / id, mistake)).err
        assert "is a plain str, not a secret" in err and "pulumi.Config().require_secret(" in err and "pulumi.Output.secret(value)" in err, err
        assert shown not in err


def test_an_unknown_keyword_names_the_nearest_field(tmp_path):
    mistake = next(m for m in MISTAKES if m.id == "keyword-misspelt")
    err = plan_mutated(write_mutated(tmp_path / "kw", mistake)).err
    assert re.search(r"VllmServerArgs: replica is not an argument of VllmServerArgs; did you mean replicas\?$", err.strip()), err
