"""Property: every invalid experiment file or --set value, generated from the schema, ends in
exit code 2 and one line of message, with no traceback, before Ray starts, writing nothing.

Generated from the schema: the ranges declared in ``ddrl.pipeline.value_ranges`` (values outside them,
values of the wrong type), the keys RLlib's ``AlgorithmConfig`` groups and our own groups accept
(misspelled or unknown), non-finite and absurd numbers, nesting deeper than any experiment's
(to past Python's recursion limit), YAML that does not parse, and bytes that are not text. Seeded
(``derandomize``), so a failure reproduces; 240 examples per run.
"""

import contextlib
import io
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddrl import algorithms
from ddrl.pipeline import experiment, validation, value_ranges

BASE = {
    "env": "HopperBulletEnv-v0",
    "algorithm": "SAC",
    "stop": {"iterations": 1},
    "env_runners": {"num_env_runners": 0},
}
PPO_BASE = {
    **BASE,
    "algorithm": "PPO",
    "training": {"train_batch_size_per_learner": 200, "minibatch_size": 100},
}
NESTED = {
    "capacity": ("training", "replay_buffer_config"),
    "fcnet_hiddens": ("rl_module", "model_config"),
    "head_fcnet_hiddens": ("rl_module", "model_config"),
}


def setting_paths(algorithm: str) -> dict[str, tuple[str, ...]]:
    """Each ranged setting the algorithm accepts -> its path in an experiment file."""
    defaults = algorithms.get_algorithm_class(algorithm).get_default_config()
    found = {}
    for group in experiment.RLLIB_GROUPS:
        for key in validation._group_parameters(type(defaults), group):
            if key in value_ranges.RANGES:
                found.setdefault(key, (group, key))
    for key, path in NESTED.items():
        found[key] = (*path, key)
    return found


PATHS = {algorithm: setting_paths(algorithm) for algorithm in ("SAC", "PPO")}


def rejected(key: str, value) -> bool:
    try:
        value_ranges.check(key, value)
    except Exception:
        return True
    return False


numbers = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([0, -1, 0.0, 1.0001, 2]),
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308]),  # numbers, but no setting
    st.sampled_from([10**20, 2**63, -(2**63)]),  # whole numbers beyond any count
)


def reads_back_as_text(text: str) -> bool:
    try:
        return bool(text.strip()) and yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


wrong_types = st.one_of(
    st.text(min_size=1, max_size=8).filter(reads_back_as_text),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=1),
    st.booleans(),
)


@st.composite
def out_of_range(draw):
    algorithm = draw(st.sampled_from(["SAC", "PPO"]))
    key = draw(st.sampled_from(sorted(PATHS[algorithm])))
    value = draw(
        st.one_of(numbers, wrong_types, st.lists(st.integers(-5, 0), min_size=1, max_size=3))
    )
    if not rejected(key, value):
        value = (
            -abs(value) - 1
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else "not-a-value"
        )
    if not rejected(key, value):  # e.g. a key whose every number is fine: fall back to a wrong type
        value = {"nested": "mapping"}
    return ("set", algorithm, ".".join(PATHS[algorithm][key]), value)


def misspell(draw, word: str) -> str:
    position = draw(st.integers(0, len(word) - 1))
    kind = draw(st.sampled_from(["drop", "double", "swap", "replace"]))
    if kind == "drop" and len(word) > 1:
        return word[:position] + word[position + 1 :]
    if kind == "double":
        return word[:position] + word[position] + word[position:]
    if kind == "swap" and position < len(word) - 1:
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    return word[:position] + draw(st.sampled_from("xqz_")) + word[position + 1 :]


@st.composite
def unknown_keys(draw):
    algorithm = draw(st.sampled_from(["SAC", "PPO"]))
    where = draw(
        st.sampled_from(
            ["top", "stop", "checkpoint", "tune", "training", "env_runners", "evaluation"]
        )
    )
    if where == "top":
        known = experiment.TOP_LEVEL_KEYS + experiment.RLLIB_GROUPS
    elif where == "stop":
        known = tuple(experiment.STOP_METRICS) + tuple(experiment.STOP_ALIASES)
    elif where in ("checkpoint", "tune"):
        known = tuple(
            (experiment.CHECKPOINT_DEFAULTS if where == "checkpoint" else experiment.TUNE_DEFAULTS)
        )
    else:
        defaults = algorithms.get_algorithm_class(algorithm).get_default_config()
        known = tuple(validation._group_parameters(type(defaults), where))
    key = misspell(draw, draw(st.sampled_from(sorted(known))))
    if key in known or key == "toolkit":
        key = key + "_x"
    path = key if where == "top" else f"{where}.{key}"
    return ("set", algorithm, path, 1)


@st.composite
def broken_yaml(draw):
    good = yaml.safe_dump(BASE, sort_keys=False)
    cut = draw(st.integers(0, len(good)))
    junk = draw(
        st.sampled_from(
            ["[", "{", ": :", "\t- x", "key: [1, 2", "'unclosed", "a: b: c", "- [", "*alias"]
        )
    )
    return ("file", good[:cut] + junk + "\n" + good[cut:])


@st.composite
def non_text(draw):
    data = draw(st.binary(min_size=1, max_size=64))
    data = b"\xff\xfe" + data  # never UTF-8
    return ("bytes", data)


@st.composite
def deep_nesting(draw):
    """A setting nested past any experiment's depth, up to past Python's recursion limit."""
    depth = draw(st.one_of(st.integers(33, 60), st.integers(400, 3000)))
    opening, closing = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
    value = opening * depth + "1" + closing * depth
    if draw(st.booleans()):
        path = draw(st.sampled_from(["training.gamma", "stop.iterations", "env_runners.x"]))
        return ("set-text", "SAC", path, value)
    text = yaml.safe_dump(BASE, sort_keys=False) + f"training: {{gamma: {value}}}\n"
    return ("file", text)


bad_inputs = st.one_of(out_of_range(), unknown_keys(), broken_yaml(), non_text(), deep_nesting())


@pytest.fixture(scope="module")
def main():
    """The train script's main, with Ray's start refused: an input that gets past the checks
    fails at once instead of training (or filling the memory) until the test's time runs out."""
    import ray
    from helpers import TRAIN_BULLET, load_script

    def refuse(*args, **kwargs):
        raise RuntimeError("Ray started: a bad input got past the checks")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray, "init", refuse)
        yield load_script(TRAIN_BULLET).main


@settings(
    max_examples=240,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bad=bad_inputs)
def test_every_generated_bad_input_is_one_clear_line(bad, main, tmp_path_factory):
    work = tmp_path_factory.mktemp("bad")
    config_file = work / "experiment.yaml"
    argv = []
    if bad[0] == "set":
        _, algorithm, path, value = bad
        config_file.write_text(yaml.safe_dump(PPO_BASE if algorithm == "PPO" else BASE))
        argv = [
            "--set",
            f"{path}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}",
        ]
    elif bad[0] == "set-text":
        _, algorithm, path, text = bad
        config_file.write_text(yaml.safe_dump(BASE))
        argv = ["--set", f"{path}={text}"]
    elif bad[0] == "file":
        config_file.write_text(bad[1])
    else:
        config_file.write_bytes(bad[1])
    results = work / "results"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--config", str(config_file), "--results-dir", str(results), *argv])
    message = err.getvalue()
    assert code == 2, (bad, message)
    assert message.startswith("error: ") and message.count("\n") == 1, (bad, message)
    assert "Traceback" not in message
    assert not results.exists(), "nothing written"


def test_the_schema_paths_reach_both_algorithms_settings():
    """The generator draws from these: RLlib's groups and ours, for SAC and PPO."""
    assert set(PATHS["SAC"]) >= {
        "gamma",
        "tau",
        "actor_hiddens",
        "capacity",
        "num_env_runners",
        "initial_alpha",
    }
    assert set(PATHS["PPO"]) >= {
        "lambda_",
        "lr",
        "fcnet_hiddens",
        "minibatch_size",
        "clip_param",
        "adam_epsilon",
    }
    assert PATHS["SAC"]["capacity"] == ("training", "replay_buffer_config", "capacity")
