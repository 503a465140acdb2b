"""What a newcomer reads: commands that match the stack, one weights size, every prerequisite, no outside references."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata

from kimi_k3.cli import main
from kimi_k3.cli.plan import port_forward_command
from kimi_k3.core import catalog
from tests.conftest import ROOT

DOCS = [ROOT / "README.md", ROOT / "policy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = sorted(p for p in (ROOT / "components").rglob("*.py"))

OUTSIDE_REFERENCES = re.compile(r"DESIGN\.md|/work/|\.\./shared|\bshared/|\bseeds?/|\bseeds? ?0\d\d\b|\bthe seed's\b|\bseed (?:flags?|arguments?|manifest)\b", re.I)
"""Files outside the repository and internal labels of the source documents."""

PENDING: set = set()
"""Files exempt from the check (none)."""


def test_no_reference_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in DOCS + [p for p in CODE if p not in PENDING]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE_REFERENCES.search(line)
    ]
    assert found == [], "references outside the repository:\n" + "\n".join(found)


def test_the_outside_reference_rule_catches_a_planted_one():
    assert OUTSIDE_REFERENCES.search("see ../shared/DESIGN.md for the facts")
    assert not OUTSIDE_REFERENCES.search("see docs/architecture.md")


def test_port_forward_commands_name_the_service_the_stack_declares(dev_plan):
    expected = port_forward_command(dev_plan.plain_outputs())
    for path in (ROOT / "README.md", ROOT / "docs" / "calling-the-endpoint.md"):
        commands = re.findall(r"kubectl -n \S+ port-forward service/\S+ \d+:\d+", path.read_text())
        assert commands and set(commands) == {expected}, path.name


def test_one_weights_size_the_catalogs():
    figure = f"{catalog.KIMI_K3.weights_gb / 1000:.1f} TB"
    sizes = []
    for path in [*DOCS, ROOT / "components" / "serving" / "lws.py"]:
        text = " ".join(path.read_text().split())
        for match in re.finditer(r"~?(\d+(?:\.\d+)?) ?TB", text):
            context = text[max(0, match.start() - 40) : match.end() + 20].lower()
            if "weight" in context or "download" in context or "stage" in context:
                sizes.append((path.name, match.group(0)))
    assert sizes and {size.lstrip("~") for _, size in sizes} == {figure}, sizes


def _deploying() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Deploying for real", 1)[1].split("\n## ", 1)[0]


def test_every_prerequisite_of_a_real_pulumi_up_is_listed():
    section = _deploying()
    pulumi_pin = next(d for d in __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"] if d.startswith("pulumi=="))
    assert f"Pulumi CLI {pulumi_pin.split('==')[1]}" in section
    for needed in ("AWS CLI v2", "aws eks get-token", "kubectl", "AWS credentials", "kimi-k3:clusterAdminRoleArns", "Capacity Block"):
        assert needed in section, needed


def test_how_to_get_a_kubeconfig_and_destroy_prod_is_spelled_out(prod_plan, dev_plan):
    section = _deploying()
    assert "pulumi stack output kubeconfig --show-secrets -s dev" in section
    assert "aws eks update-kubeconfig --name" in section
    # prod really has deletion protection, dev does not: the README's extra step is needed exactly there
    assert prod_plan.one("eks:index:Cluster").plain_inputs["deletionProtection"] is True
    assert dev_plan.one("eks:index:Cluster").plain_inputs.get("deletionProtection") is False
    assert f"# {prod_plan.plain_outputs()['clusterName']}" in section
    steps = ["--no-deletion-protection", "aws eks wait cluster-active", "pulumi destroy -s prod"]
    positions = [section.index(step) for step in steps]
    assert positions == sorted(positions)


def test_version_comes_from_the_package_metadata(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kimi-k3 {metadata.version('kimi-k3-aws')}"
    proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"kimi-k3 {metadata.version('kimi-k3-aws')}"


def _relative_links(path):
    text = path.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
            yield target.split("#", 1)[0]


def test_every_relative_link_reaches_a_file_of_the_repository():
    broken = [
        f"{path.relative_to(ROOT)}: {target}"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for target in _relative_links(path)
        if not (path.parent / target).exists()
    ]
    assert broken == [], "links to files that do not exist:\n" + "\n".join(broken)


def test_the_readme_names_every_docs_page_and_every_component_package():
    readme = (ROOT / "README.md").read_text()
    assert [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in readme] == []
    packages = [p.name for p in sorted((ROOT / "components").iterdir()) if (p / "__init__.py").exists()]
    assert [name for name in packages if f"`{name}/`" not in readme] == []
