"""What a run costs: the hourly price of an instance type (on-demand or spot), estimates and a finished job's cost.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

from ddrl.analysis.prices import INSTANCE_PRICES, SPOT_SAVING


def hourly_price(instance_type: str) -> float | None:
    return INSTANCE_PRICES.get(instance_type)


def estimate_cost(instance_type: str, count: int, hours: float, spot: bool) -> str:
    price = hourly_price(instance_type)
    if price is None:
        return f"{instance_type}: no price in the table; see the SageMaker pricing page"
    cost = price * count * hours
    text = f"{count} x {instance_type} at ${price:.3f}/h for {hours:g} h: ${cost:.2f} on demand"
    if spot:
        text += (
            f", about ${cost * (1 - SPOT_SAVING):.2f} with managed spot (~{SPOT_SAVING:.0%} saving)"
        )
    return text


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
        return f"$0 (ran on this machine); on AWS, per instance: {listed}"
    if None in prices:
        return f"{billable} billable seconds on {kinds} (a price not in the table)"
    cost = sum(billable / 3600 * price * count for (_, count), price in zip(groups, prices))
    return f"{billable} billable s on {kinds} = ${cost:.3f}"
