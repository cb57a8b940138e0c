"""The walking humanoid's figure and summary from a curve.csv (ddrl.analysis.walking)."""

import pytest
from helpers import CTE_POWER, load_script

from ddrl.errors import UserError

PLOT_WALKING = CTE_POWER / "scripts" / "plot" / "plot-walking.py"
HEADER = "trial,training_iteration,env_steps,time_total_s,mean_return,episodes_in_window,mean_distance,eval_return,eval_distance\n"


def test_the_summary_says_where_the_run_stands_and_when_it_crossed_each_mark(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text(
        HEADER
        + "t,1,1000000,600,500,100,2.0,,\n"
        + "t,2,2000000,1200,1400,100,8.0,1300,7.5\n"
        + "t,2,2000000,1200,1450,100,9.0,1350,8.5\n"  # iteration 2 again after a resume: kept last
        + "t,3,3000000,1800,2100,100,12.5,,\n"
    )
    output = tmp_path / "walking.png"
    assert load_script(PLOT_WALKING).main([str(curve), "--output", str(output)]) == 0
    assert output.stat().st_size > 10_000
    summary = (tmp_path / "summary.md").read_text()
    assert "| 3,000,000 | 0.5 h | 2100 | 12.5 m | 1350, 8.5 m |" in summary
    assert "| mean return 1,300 (the zoo's 1e7 level) | 2,000,000 |" in summary
    assert "| mean return 2,000 | 3,000,000 |" in summary
    assert "| mean distance 10 m | 3,000,000 |" in summary


def test_a_file_that_is_no_curve_is_one_line(tmp_path, capsys):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    for name, says in (
        ("empty.csv", "empty"),
        ("other.csv", "lacks"),
        ("none.csv", "does not exist"),
    ):
        assert load_script(PLOT_WALKING).main([str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1
    from ddrl.analysis import walking

    with pytest.raises(UserError, match="no iterations"):
        (tmp_path / "header.csv").write_text(HEADER)
        walking.read_curve(tmp_path / "header.csv")
