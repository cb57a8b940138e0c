"""The documentation's links lead somewhere in a fresh clone: every relative link of every
tracked Markdown file names a tracked file, or a folder holding tracked files (a file that
.gitignore keeps out exists only where it was made)."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked() -> set[str]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if listing.returncode != 0:
        pytest.skip("not a git checkout")
    return set(filter(None, listing.stdout.split("\0")))


def test_every_relative_link_of_the_documentation_is_tracked():
    files = tracked()
    folders = {str(parent) for name in files for parent in Path(name).parents}
    broken = []
    for page in sorted(name for name in files if name.endswith(".md")):
        text = (REPO / page).read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:|#", target):
                continue  # a web address, mail, or an anchor on the same page
            path = ((REPO / page).parent / target.split("#")[0]).resolve()
            relative = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else None
            if relative not in files and relative not in folders:
                broken.append(f"{page}: {target}")
    assert not broken, "links to nothing in a fresh clone:\n" + "\n".join(broken)


def test_the_module_table_names_every_module_of_the_package_and_nothing_else():
    """cte-power/ddrl/README.md's table is the map a newcomer reads first: it stays complete."""
    import re

    root = Path(__file__).resolve().parents[1] / "cte-power" / "ddrl"
    rows = [
        line.split("|")[1:3]
        for line in (root / "README.md").read_text().splitlines()
        if line.startswith("| `") or line.startswith("| **`")
    ]
    named = {n.strip() for first, _ in rows for n in re.findall(r"`([^`]+)`", first)}
    folders = {n.rstrip("/") for n in named if n.endswith("/")}
    # a folder's row may name its modules in its description (unity/: `settings`, `ports`...)
    described = {
        n.strip()
        for first, text in rows
        if first.strip().strip("*`").endswith("/")
        for n in re.findall(r"`(\w+)`", text)
    }
    modules = set()
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            continue
        # a module of a folder documented as a whole (`sac/`) is covered by the folder's row
        if len(parts) > 2 and parts[-2] in folders:
            continue
        modules.add(parts[-1])
    names = {part.strip() for n in named for part in n.split(",")} - {f + "/" for f in folders}
    missing = sorted(modules - names - described)
    assert not missing, f"modules missing from ddrl/README.md's table: {missing}"
    stale = sorted(n for n in names if n not in modules and n.rstrip("/") not in folders)
    assert not stale, f"rows of ddrl/README.md's table naming no module: {stale}"
