"""What a run costs: the hourly price of an instance type (on-demand or spot), estimates and a finished job's cost.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

from ddrl.analysis.prices import INSTANCE_PRICES, PRICES_AS_OF, SPOT_SAVING
from ddrl.errors import UserError

#: The notebook's ``PRICES`` (USD per hour, e.g. today's from the SageMaker pricing page) replace
#: the table's for the instance types they name.
PRICES: dict[str, float] = {}


def use_prices(prices: dict[str, float]) -> None:
    """Take ``prices`` (instance type -> USD per hour) over the table's from now on."""
    for kind, price in prices.items():
        if not str(kind).startswith("ml.") or not isinstance(price, int | float) or price <= 0:
            raise UserError(
                f"PRICES {kind!r}: {price!r}; give instance types and USD per hour, "
                'e.g. PRICES = {"ml.c5.4xlarge": 0.816}.'
            )
    PRICES.clear()
    PRICES.update(prices)


def hourly_price(instance_type: str) -> float | None:
    return PRICES.get(instance_type, INSTANCE_PRICES.get(instance_type))


def _as_of(instance_types) -> str:
    if all(kind in PRICES for kind in instance_types):
        return "PRICES given in the notebook"
    return PRICES_AS_OF + "; set PRICES for today's"


def estimate_cost(instance_type: str, count: int, hours: float, spot: bool) -> str:
    price = hourly_price(instance_type)
    if price is None:
        return (
            f"{instance_type}: no price in the table; give one in PRICES (SageMaker pricing page)"
        )
    cost = price * count * hours
    text = f"{count} x {instance_type} at ${price:.3f}/h for {hours:g} h: ${cost:.2f} on demand"
    if spot:
        text += (
            f", about ${cost * (1 - SPOT_SAVING):.2f} with managed spot (~{SPOT_SAVING:.0%} saving)"
        )
    return f"{text} ({_as_of([instance_type])})"


def job_cost(description: dict, mode: str) -> str:
    """What a finished job cost (SageMaker bills BillableTimeInSeconds per instance)."""
    resources = description["ResourceConfig"]
    groups = [
        (g["InstanceType"], int(g.get("InstanceCount", 1)))
        for g in resources.get("InstanceGroups")
        or [
            {
                "InstanceType": resources["InstanceType"],
                "InstanceCount": resources.get("InstanceCount", 1),
            }
        ]
    ]
    billable = description.get("BillableTimeInSeconds")
    kinds = " + ".join(f"{count} x {kind}" for kind, count in groups)
    prices = [hourly_price(kind) for kind, _ in groups]
    if mode == "local" or billable is None:
        listed = ", ".join(
            f"{kind} ${price or 0:.3f}/h" for (kind, _), price in zip(groups, prices)
        )
        return f"$0 (ran on this machine); on AWS, per instance: {listed} ({_as_of([k for k, _ in groups])})"
    if None in prices:
        return f"{billable} billable seconds on {kinds} (a price not in the table)"
    cost = sum(billable / 3600 * price * count for (_, count), price in zip(groups, prices))
    return f"{billable} billable s on {kinds} = ${cost:.3f} ({_as_of([k for k, _ in groups])})"
