"""Property: every script's numeric option, given a value outside its range (0, negative, past its
upper bound, inf, nan, text), ends in exit code 2 and one line that names the option, with no
traceback, before anything runs: the render, plot and benchmark scripts as well as training.

The options and their ranges are read from each script's own parser (every number of ours is
an ``ddrl.options.whole`` or ``ddrl.options.real``), so an option added later is covered as well.
Seeded (``derandomize``), 200 examples a run.
"""

import contextlib
import io

import pytest
from helpers import CTE_POWER, load_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddrl import options

SCRIPTS = sorted(
    path
    for folder in ("train", "render", "plot", "bench")
    for path in (CTE_POWER / "scripts" / folder).glob("*.py")
)
BAD_TEXT = ["0", "-1", "-7.5", "1e308", "99999999999", "inf", "-inf", "nan", "abc", "1,000", ""]


def parser_of(module):
    """The script's parser, as its main() builds it (main is called with --help captured)."""
    built = []
    original = options.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        built.append(self)
        raise SystemExit(0)

    options.ArgumentParser.parse_args = capture
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            module.main([])
    finally:
        options.ArgumentParser.parse_args = original
    return built[0]


def numeric_options() -> list[tuple[str, str, object]]:
    """(script, option, its type) for every option of ours that takes a number."""
    found = []
    for path in SCRIPTS:
        module = load_script(path)
        parser = parser_of(module)
        for action in parser._actions:
            if action.option_strings and getattr(action.type, "__qualname__", "").startswith(
                ("whole.", "real.")
            ):
                found.append((path.name, action.option_strings[-1], action.type))
    return found


OPTIONS = numeric_options()


def rejects(kind, text: str) -> bool:
    try:
        kind(text)
    except Exception:
        return True
    return False


@st.composite
def bad_option(draw):
    script, option, kind = draw(st.sampled_from(OPTIONS))
    candidates = [t for t in BAD_TEXT if rejects(kind, t)]
    return script, option, draw(st.sampled_from(candidates))


def test_every_script_with_numbers_is_covered():
    scripts = {script for script, _, _ in OPTIONS}
    assert {
        "train-bullet-envs.py",
        "render-bullet.py",
        "throughput.py",
        "learning-benchmark.py",
        "cost-analysis.py",
        "plot-time.py",
        "train-sb3.py",
    } <= scripts, scripts
    assert len(OPTIONS) >= 25


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(bad=bad_option())
def test_every_bad_number_is_one_line(bad):
    script, option, text = bad
    main = load_script(CTE_POWER / "scripts" / _folder(script) / script).main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([f"{option}={text}"])
        except SystemExit as exit_:
            code = exit_.code
    message = err.getvalue()
    assert code == 2, (bad, message)
    assert message.startswith("error: ") and message.count("\n") == 1, (bad, message)
    assert f"argument {option}" in message, (bad, message)


def _folder(script: str) -> str:
    return next(p.parent.name for p in SCRIPTS if p.name == script)


@pytest.mark.parametrize("text", ["inf", "nan", "-1", "0", "1e308"])
def test_the_types_refuse_what_is_no_setting(text):
    assert rejects(options.whole(1), text)
    assert rejects(options.real(above=0, high=1e6), text)
