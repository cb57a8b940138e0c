"""The `ddrl plot NAME` and `ddrl bench NAME` commands, one module each (``plot_results``:
`ddrl plot results`); the thesis-named scripts of ``scripts/plot/`` and ``scripts/bench/`` call
them."""
