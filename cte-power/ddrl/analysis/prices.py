"""The one price table of the repository: what an hour of each SageMaker training instance costs.

Used by the cost analysis (``scripts/plot/cost-analysis.py``, ``--price`` overrides it) and by
the SageMaker notebook's cost estimate. On-demand, us-west-2, USD per hour, as the thesis's
SageMaker seed (002) quotes them (SageMaker pricing, September 2020). Every estimate says so
(``PRICES_AS_OF``); refresh them from the SageMaker pricing page with ``--price TYPE=USD`` in the
cost analysis and ``PRICES`` in the notebook.
"""

INSTANCE_PRICES = {"ml.c5.4xlarge": 0.952, "ml.g4dn.4xlarge": 1.686, "ml.p3.2xlarge": 4.284}
#: Where and when these prices were quoted: said with every estimate made from them.
PRICES_AS_OF = "us-west-2 on-demand prices of September 2020"
#: Managed spot training saves "up to 90%"; the SageMaker RL starter kit's IMPALA benchmark saw about 70%.
SPOT_SAVING = 0.70
