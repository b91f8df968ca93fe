"""The front door and the docs hold together: every relative link in the README, docs/ and the evidence READMEs
resolves, the README stays short, and evidence/INDEX.md lists every campaign."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "evidence").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold commands, not links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:|#)", target):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_front_door() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for page in (
        "docs/howto-add-target.md",
        "docs/howto-add-change.md",
        "docs/howto-rerun-row.md",
        "evidence/INDEX.md",
    ):
        assert f"]({page})" in readme


def test_the_evidence_index_lists_every_campaign() -> None:
    index = (REPO / "evidence" / "INDEX.md").read_text()
    campaigns = sorted(p.name for p in (REPO / "evidence").iterdir() if p.is_dir())
    assert [c for c in campaigns if f"[{c}]({c}/" not in index] == []
    assert all(
        (REPO / "evidence" / c / "README.md").exists() or (REPO / "evidence" / c / "FINDINGS.md").exists()
        for c in campaigns
    )


def test_the_report_page_gives_the_exit_codes_ci_report_has(capsys) -> None:
    """docs/report.md says what `ci report` exits with, as its --help does: 1 when a planned row failed, and each
    other code once (an earlier page also said "0 whenever the report was written")."""
    from ci import cli

    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    codes = re.findall(r"^  (\d+)  ", capsys.readouterr().out.split("exit codes:")[1], flags=re.M)
    page = (REPO / "docs" / "report.md").read_text()
    said = page[page.index("Exit codes") :].split("\n\n")[0]
    assert codes == ["0", "1", "2", "5", "7"] and all(f"**{c}**" in said for c in codes)
    assert "0 whenever" not in page and "exits 1 when a planned row failed" in page
