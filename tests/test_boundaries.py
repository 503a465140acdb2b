"""Every enforced limit at its edge (the table of ``tests/boundaries.py``): the value at the limit is accepted, one unit
beyond it is refused with its one-line message; a limit the validators enforce that the table lacks fails a test."""

from __future__ import annotations

import re

import pytest

from kimi_k3.stack.config_keys import CONFIG_KEYS
from tests.boundaries import KEYS_WITHOUT_ORDERED_LIMIT, LIMITS, NOT_LIMITS, validator_sites


@pytest.mark.parametrize("row", LIMITS, ids=lambda row: row.id)
def test_the_value_at_the_limit_is_accepted_and_one_unit_beyond_is_refused(row):
    row.probe(row.at)
    with pytest.raises(row.error) as caught:
        row.probe(row.beyond)
    message = str(caught.value)
    assert row.message in message, message
    assert "\n" not in message, message


def test_the_rows_are_distinct():
    ids = [row.id for row in LIMITS]
    assert len(set(ids)) == len(ids), sorted({i for i in ids if ids.count(i) > 1})


def test_every_limit_the_validators_enforce_has_a_row():
    """The walk of the validators (every ordered comparison that refuses, every range helper's call, every predicate's comparison) finds only sites
    that a row names, or that :data:`NOT_LIMITS` says are no limit; and every named site still exists."""
    sites = validator_sites()
    named = {site for row in LIMITS for site in row.sites}
    missing = [site for site in sites if site not in named and site not in NOT_LIMITS]
    assert not missing, "limits without a row in tests/boundaries.py:\n" + "\n".join(missing)
    stale = sorted((named | set(NOT_LIMITS)) - set(sites))
    assert not stale, "rows name sites the validators no longer have:\n" + "\n".join(stale)
    assert not named & set(NOT_LIMITS), "a site with a row is a limit"


_DOCUMENTED_RANGE = re.compile(r"(?<![\w/.])(\d+) to (\d+)(?![\w/.])")


@pytest.mark.parametrize("name", [k.name for k in CONFIG_KEYS.values() if k.type == "integer"])
def test_every_integer_key_has_rows_at_its_documented_bounds(name):
    """An integer config key is limited (it has rows) or says why not; a ``low to high`` in its description is tested at
    both ends, at exactly those values: the documentation and the enforcement agree."""
    rows = [row for row in LIMITS if row.key == name]
    if name in KEYS_WITHOUT_ORDERED_LIMIT:
        assert not rows
        return
    assert rows, f"{name} has no row in tests/boundaries.py"
    documented = _DOCUMENTED_RANGE.search(CONFIG_KEYS[name].description)
    if documented:
        low, high = map(int, documented.groups())
        assert low in [row.at for row in rows if row.edge == "min"], (name, low)
        assert high in [row.at for row in rows if row.edge == "max"], (name, high)
