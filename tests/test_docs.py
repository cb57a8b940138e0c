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
