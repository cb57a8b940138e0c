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


def test_the_traced_path_from_ddrl_train_to_the_sac_update_is_true_and_five_files_long():
    """ddrl/README.md tells a newcomer which files to open, in order, from ``ddrl train`` to SAC's
    gradient step: each named function is in its file, each calls the next (but across Tune and
    RLlib, where the README says so), and the path opens at most five of our files."""
    import ast

    root = Path(__file__).resolve().parents[1] / "cte-power" / "ddrl"
    text = (root / "README.md").read_text()
    paragraph = text[text.index("From `ddrl train` to SAC's gradient step") :].split("\n\n")[0]
    paragraph = " ".join(paragraph.split())
    steps = re.findall(r"`([\w/]+\.py)` \(([^)]*)\)", paragraph)
    assert len({file for file, _ in steps}) <= 5, steps
    sources = []
    for file, named in steps:
        tree = ast.parse((root / file).read_text())
        functions = {
            node.name: ast.get_source_segment((root / file).read_text(), node)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)
        }
        names = re.findall(r"`(\w+)`", named)
        assert names and all(n in functions for n in names), f"{file}: {names} not all defined"
        sources.append((file, names, "\n".join(functions[n] for n in names)))
    gap = re.search(r"between the (\w+) and the (\w+)", paragraph)
    ordinals = ["first", "second", "third", "fourth", "fifth"]
    across_rllib = ordinals.index(gap.group(1)) if gap else None
    for i, ((file, names, source), (next_file, next_names, _)) in enumerate(
        zip(sources, sources[1:])
    ):
        if i == across_rllib:
            continue  # Tune calls RLlib's Algorithm.train, which calls our training_step
        assert re.search(rf"\b{next_names[0]}\(", source), f"{file} does not call {next_file}"
