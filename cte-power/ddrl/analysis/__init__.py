"""Analysis of finished runs: summaries, search tables, scaling and cost, plots."""
