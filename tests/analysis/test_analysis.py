"""Summaries, speed-up tables, plots and cost: from a real tiny training and the thesis's CSV."""

import numpy as np
import pandas as pd
import pytest
from helpers import CTE_POWER, TINY_PPO, TRAIN_BULLET, load_script, run_script

from ddrl.analysis import plotting, scaling, summaries
from ddrl.errors import UserError

THESIS = CTE_POWER / "results" / "humanoid" / "thesis-humanoid-iteration-times.csv"
PLOT = CTE_POWER / "scripts" / "plot"
#: the tests of the module's real sweep run on one worker, so the sweep is trained once
ON_THE_SWEEP = pytest.mark.xdist_group("analysis-sweep")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A real tiny scaling sweep: PPO with 0 and 1 env runners, 3 iterations each."""
    results = tmp_path_factory.mktemp("results")
    proc = run_script(
        TRAIN_BULLET,
        *TINY_PPO,
        "--results-dir",
        results,
        "--name",
        "sweep",
        "--set",
        "stop.iterations=3",
        "--set",
        "env_runners.num_env_runners={grid_search: [0, 1]}",
        "--set",
        "tune.max_concurrent_trials=1",
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return results / "sweep"


@pytest.fixture(scope="module")
def summary_csv(sweep, tmp_path_factory):
    out = tmp_path_factory.mktemp("summaries")
    assert load_script(PLOT / "summarize-data.py").main([str(sweep), "--output-dir", str(out)]) == 0
    return out / "humanoid" / "sweep.csv"


@pytest.mark.slow
@ON_THE_SWEEP
def test_summary_of_a_real_training_has_the_expected_rows_and_columns(summary_csv):
    table = pd.read_csv(summary_csv)
    assert len(table) == 6, "2 trials x 3 iterations"
    assert sorted(table["num_env_runners"].unique()) == [0, 1]
    assert set(table["algorithm"]) == {"PPO"} and set(table["env"]) == {"HumanoidBulletEnv-v0"}
    for column in (
        "experiment",
        "trial",
        "num_gpus",
        "seed",
        "iteration",
        "env_steps",
        "return_mean",
        "return_min",
        "return_max",
        "time_this_iter_s",
        "time_total_s",
        "timer_iteration_s",
        "sampling_s",
        "learning_s",
        "sync_s",
    ):
        assert column in table.columns, column
    for _, trial in table.groupby("trial"):
        assert trial["iteration"].tolist() == [1, 2, 3]
        assert trial["env_steps"].tolist() == [400, 800, 1200]
        assert (trial["return_min"] <= trial["return_mean"]).all() and (
            trial["return_mean"] <= trial["return_max"]
        ).all()
    # the humanoid's forward distance beside the return, over the same episodes
    assert "distance_mean" in table.columns and "eval_distance" in table.columns
    assert table["distance_mean"].notna().equals(table["return_mean"].notna())
    assert table["distance_mean"].dropna().abs().lt(5).all(), "a falling humanoid: metres, not km"
    # RLlib's timers are moving averages: compare them with its (equally smoothed) iteration timer
    assert (table["sampling_s"] + table["learning_s"] <= table["timer_iteration_s"] * 1.02).all()
    assert (table["sampling_s"] > 0).all() and (table["learning_s"] > 0).all()


def test_speedup_and_efficiency_from_the_thesis_csv_match_hand_computed_values():
    table = scaling.add_speedup(scaling.timings_from_thesis(pd.read_csv(THESIS)))

    def row(algorithm, runners, gpus):
        return table[
            (table.algorithm == algorithm)
            & (table.num_env_runners == runners)
            & (table.num_gpus == gpus)
        ].iloc[0]

    # thesis table 6 (TD3): slowest is 1 runner without GPU, 25.56 s
    assert row("TD3", 64, 1).speedup == pytest.approx(
        25.56 / 1.99
    )  # 12.84; the thesis prints 12.86
    assert row("TD3", 2, 0).speedup == pytest.approx(25.56 / 14.38)
    assert row("TD3", 8, 0).efficiency == pytest.approx((25.56 / 8.12) / 8)
    # SAC: x36 headline; GPU series efficiency against its own 1-runner point (67.49 s)
    assert row("SAC", 64, 1).speedup == pytest.approx(92.87 / 2.55)
    assert row("SAC", 4, 1).efficiency == pytest.approx((67.49 / 28.46) / 4)
    # PPO: the slowest configuration is 1 runner *with* GPU (42.59 s); CPU series starts at 2 runners
    assert row("PPO", 64, 1).speedup == pytest.approx(42.59 / 2.78)
    assert row("PPO", 4, 0).efficiency == pytest.approx((34.54 / 23.53) / 2)


def test_speedup_tables_in_markdown_and_latex():
    table = scaling.add_speedup(scaling.timings_from_thesis(pd.read_csv(THESIS)))
    markdown = scaling.speedup_table(table, "TD3", "markdown")
    assert (
        markdown.splitlines()[0]
        == "| Env runners | GPUs | Iteration time (s) | Speed-up | Efficiency |"
    )
    assert "| 64 | 1 | 1.99 | 12.84 | 0.17 |" in markdown and len(markdown.splitlines()) == 2 + 15
    latex = scaling.speedup_table(table, "TD3", "latex")
    assert r"\begin{tabular}{rrrrr}" in latex and r"64 & 1 & 1.99 & 12.84 & 0.17 \\" in latex


def series_of(ax):
    return {line.get_label(): line for line in ax.get_lines()}


@pytest.mark.slow
@ON_THE_SWEEP
def test_plot_results_draws_return_against_steps_and_time(summary_csv, tmp_path):
    figure = plotting.learning_curves(pd.read_csv(summary_csv))
    by_steps, by_time = figure.axes
    assert by_steps.get_xlabel() == "env steps" and by_time.get_xlabel().startswith(
        "wall-clock time"
    )
    assert by_steps.get_ylabel() == "mean episode return (last 100 episodes)"
    assert list(series_of(by_steps)) == ["PPO (n=2)"], (
        "one curve per algorithm, mean of its 2 trials"
    )
    assert len(by_steps.collections) == 1, "a spread band across the 2 trials"
    line = series_of(by_steps)["PPO (n=2)"]
    assert line.get_xdata().max() <= 1200
    raw = pd.read_csv(summary_csv)
    assert line.get_ydata().min() >= raw["return_mean"].min() - 1e-6, "returns are not rescaled"
    output = tmp_path / "curves.png"
    assert (
        load_script(PLOT / "plot-results.py").main([str(summary_csv), "--output", str(output)]) == 0
    )
    assert output.stat().st_size > 10_000


def test_learning_curves_draw_evaluation_returns_dashed_beside_training():
    rows = [
        {
            "experiment": "e",
            "trial": f"t{t}",
            "algorithm": "SAC",
            "env": "X",
            "iteration": i,
            "env_steps": 1000 * i,
            "time_total_s": 10.0 * i,
            "return_mean": float(i),
            "eval_return": float(2 * i) if i % 2 == 0 else None,
        }
        for t in range(2)
        for i in range(1, 9)
    ]
    by_steps, _ = plotting.learning_curves(pd.DataFrame(rows)).axes
    lines = series_of(by_steps)
    assert set(lines) == {"SAC, training (n=2)", "SAC, evaluation (n=2)"}
    evaluation = lines["SAC, evaluation (n=2)"]
    assert (
        evaluation.get_linestyle() == "--"
        and evaluation.get_color() == lines["SAC, training (n=2)"].get_color()
    )
    assert max(evaluation.get_ydata()) == 16.0, "evaluation rounds only (every other iteration)"
    # a few rounds are drawn as points (markers) at the rounds themselves
    assert evaluation.get_marker() == "o"
    assert list(evaluation.get_xdata()) == [2000, 4000, 6000, 8000]


def test_a_single_evaluation_round_is_a_point_and_the_panels_share_one_y_label():
    """make demo's figure once showed its one evaluation round as a stray dash beside the legend,
    and the right panel's y label ran through its title."""
    rows = [
        {"experiment": "e", "trial": "t", "algorithm": "SAC", "env": "X", "iteration": i,
         "env_steps": 1000 * i, "time_total_s": 10.0 * i, "return_mean": float(i),
         "eval_return": 5.0 if i == 10 else None}
        for i in range(1, 21)
    ]  # fmt: skip
    figure = plotting.learning_curves(pd.DataFrame(rows))
    by_steps, by_time = figure.axes
    for ax in (by_steps, by_time):
        evaluation = series_of(ax)["SAC, evaluation (n=1)"]
        assert evaluation.get_marker() == "o" and list(evaluation.get_ydata()) == [5.0]
    assert by_steps.get_ylabel() and not by_time.get_ylabel()
    assert by_time.get_shared_y_axes().joined(by_steps, by_time)
    assert by_steps.get_legend() is not None and by_time.get_legend() is None


def test_plot_time_with_the_thesis_has_both_series_and_the_ideal_line(tmp_path):
    assert (
        load_script(PLOT / "plot-time.py").main(
            ["--thesis", "--algorithms", "SAC", "--output-dir", str(tmp_path)]
        )
        == 0
    )
    assert (tmp_path / "scaling-sac.png").is_file()
    assert (tmp_path / "scaling-sac-thesis.md").read_text().count("\n") == 2 + 14
    assert r"\end{tabular}" in (tmp_path / "scaling-sac-thesis.tex").read_text()
    timings = scaling.add_speedup(scaling.timings_from_thesis(pd.read_csv(THESIS)))
    time_ax, speed_ax, eff_ax = plotting.scaling(timings, "SAC").axes
    assert set(series_of(time_ax)) == {"CPU only (thesis)", "with GPU (thesis)"}
    assert "ideal (linear)" in series_of(speed_ax)
    assert (
        time_ax.get_xscale() == "symlog"
        and time_ax.get_yscale() == "log"
        and speed_ax.get_yscale() == "log"
    )
    assert time_ax.get_xlabel() == "env runners" and eff_ax.get_ylabel() == "parallel efficiency"
    cpu = series_of(time_ax)["CPU only (thesis)"]
    assert list(cpu.get_xdata()) == [1, 4, 8, 16, 32, 64], "points joined, no fitted line"
    assert list(cpu.get_ydata()) == [92.87, 37.83, 19.48, 15.46, 11.17, 6.37]


@pytest.mark.slow
@ON_THE_SWEEP
def test_time_breakdown_and_our_scaling_plot(summary_csv, tmp_path):
    timings = scaling.add_speedup(scaling.timings_from_summaries(pd.read_csv(summary_csv)))
    assert sorted(timings["num_env_runners"]) == [0, 1]
    ax = plotting.time_breakdown(timings, "PPO").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1"]
    assert [c.get_label() for c in ax.containers] == ["sampling", "learning", "sync", "other"]
    heights = np.sum([[bar.get_height() for bar in c] for c in ax.containers], axis=0)
    assert np.allclose(heights, 1.0, atol=0.05), "shares of one iteration add up to 1"
    assert (
        load_script(PLOT / "plot-time-breakdown.py").main(
            [str(summary_csv), "--output-dir", str(tmp_path)]
        )
        == 0
    )
    assert (
        load_script(PLOT / "plot-time.py").main([str(summary_csv), "--output-dir", str(tmp_path)])
        == 0
    )
    assert (tmp_path / "time-breakdown-ppo.png").is_file() and (
        tmp_path / "scaling-ppo-ours.md"
    ).is_file()


@pytest.mark.slow
@ON_THE_SWEEP
def test_cost_analysis(summary_csv, tmp_path, capsys):
    table = pd.read_csv(summary_csv)
    prices = scaling.with_prices({"ml.c5.4xlarge": 2.0, "my.instance": 1.0})
    costs = scaling.run_costs(table, prices, target_return=-1e9, env_steps=1200)
    first = costs.iloc[0]
    trial = table[table.trial == first.trial]
    assert first.seconds_to_target == pytest.approx(trial.time_total_s.iloc[0])
    assert first["cost_env_steps_ml.c5.4xlarge"] == pytest.approx(
        trial.time_total_s.iloc[-1] / 3600 * 2.0
    )
    assert first["cost_env_steps_my.instance"] == pytest.approx(trial.time_total_s.iloc[-1] / 3600)
    assert not first.env_steps_extrapolated
    doubled = scaling.run_costs(table, prices, -1e9, env_steps=2400).iloc[0]
    assert doubled.env_steps_extrapolated and doubled.seconds_for_env_steps == pytest.approx(
        2 * trial.time_total_s.iloc[-1]
    )
    assert (
        load_script(PLOT / "cost-analysis.py").main(
            [str(summary_csv), "--target-return=-1e9", "--output-dir", str(tmp_path)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "ml.g4dn.4xlarge" in out
    assert "prices: us-west-2 on-demand prices of September 2020" in out  # the table's date
    assert (tmp_path / "cost-env-steps.png").is_file() and (
        tmp_path / "cost-to-target.png"
    ).is_file()


def test_bad_input_gives_clear_messages(tmp_path, capsys):
    with pytest.raises(UserError, match="no Tune trials"):
        summaries.summarize_experiment(tmp_path)
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="lacks the columns"):
        summaries.read_summaries([tmp_path / "x.csv"], ("experiment", "return_mean"))
    assert load_script(PLOT / "summarize-data.py").main([str(tmp_path)]) == 2
    assert "no Tune trials" in capsys.readouterr().err
    assert load_script(PLOT / "plot-results.py").main([str(tmp_path / "x.csv")]) == 2
    assert "lacks the columns" in capsys.readouterr().err
    (tmp_path / "empty.csv").write_text("")
    output = tmp_path / "empty.png"
    code = load_script(PLOT / "plot-results.py").main(
        [str(tmp_path / "empty.csv"), "--output", str(output)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "it is empty" in err and len(err.strip().splitlines()) == 1
    assert not output.exists()
    assert load_script(PLOT / "plot-time-breakdown.py").main([str(tmp_path / "missing.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert (
        load_script(PLOT / "cost-analysis.py").main(
            [str(tmp_path / "x.csv"), "--price", "ml.c5=cheap"]
        )
        == 2
    )
    assert "--price 'ml.c5=cheap': expected NAME=NUMBER" in capsys.readouterr().err
    thesis_only = scaling.add_speedup(scaling.timings_from_thesis(pd.read_csv(THESIS)))
    with pytest.raises(UserError, match="not the thesis CSV"):
        plotting.time_breakdown(thesis_only, "PPO")
    with pytest.raises(UserError, match="no timings for algorithm DQN"):
        plotting.scaling(thesis_only, "DQN")


def test_readme_globs_work_although_they_take_the_thesis_csv(tmp_path, capsys):
    """plot-results.py and cost-analysis.py results/humanoid/*.csv, as the README writes them."""
    committed = sorted((CTE_POWER / "results" / "humanoid").glob("*.csv"))
    assert any("thesis" in p.name for p in committed) and len(committed) >= 2
    output = tmp_path / "curves.png"
    assert (
        load_script(PLOT / "plot-results.py").main([*map(str, committed), "--output", str(output)])
        == 0
    )
    assert "note: skipping" in capsys.readouterr().err and output.stat().st_size > 10_000
