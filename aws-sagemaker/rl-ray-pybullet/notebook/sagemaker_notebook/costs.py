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


#: vCPUs of the CPU sizes (``ml.<family>.<size>``): within a CPU family, SageMaker's price is
#: proportional to them (ml.c5.4xlarge costs four ml.c5.xlarge); GPU families are not.
_SIZE_VCPUS = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "9xlarge": 36,
               "12xlarge": 48, "18xlarge": 72, "24xlarge": 96}  # fmt: skip


def hourly_price(instance_type: str) -> float | None:
    """USD per hour: ``PRICES``, else the table, else scaled from a table entry of the same CPU
    family by vCPUs (``derived_from`` says which), else None."""
    if instance_type in PRICES or instance_type in INSTANCE_PRICES:
        return PRICES.get(instance_type, INSTANCE_PRICES.get(instance_type))
    source = derived_from(instance_type)
    if source is None:
        return None
    size, source_size = instance_type.split(".")[-1], source.split(".")[-1]
    return hourly_price(source) * _SIZE_VCPUS[size] / _SIZE_VCPUS[source_size]


def derived_from(instance_type: str) -> str | None:
    """The priced instance type of the same CPU family that ``instance_type``'s price is scaled
    from, where it has none of its own."""
    from sagemaker_notebook.parameters import is_gpu_instance

    family, _, size = instance_type.rpartition(".")
    if instance_type in PRICES or instance_type in INSTANCE_PRICES:
        return None
    if is_gpu_instance(instance_type) or size not in _SIZE_VCPUS:
        return None
    priced = [k for k in [*PRICES, *INSTANCE_PRICES] if k.rpartition(".")[0] == family]
    priced = [k for k in priced if k.rpartition(".")[2] in _SIZE_VCPUS]
    return priced[0] if priced else None


def _as_of(instance_types) -> str:
    derived = [
        f"{kind}: {_SIZE_VCPUS[kind.split('.')[-1]]}/{_SIZE_VCPUS[source.split('.')[-1]]} of "
        f"{source}'s price"
        for kind in instance_types
        if (source := derived_from(kind))
    ]
    if all(kind in PRICES for kind in instance_types):
        return "PRICES given in the notebook"
    return "; ".join([PRICES_AS_OF, *derived, "set PRICES for today's"])


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


def estimate_endpoint(instance_type: str) -> str:
    """An endpoint bills its instance per hour for as long as it exists."""
    price = hourly_price(instance_type)
    if price is None:
        return (
            f"endpoint on {instance_type}: no price in the table; give one in PRICES "
            "(SageMaker pricing page, real-time inference)"
        )
    return (
        f"endpoint on {instance_type}: about ${price:.3f}/h, ${price * 24:.2f} a day, while it "
        f"exists: section 10 deletes it ({_as_of([instance_type])}; the table's are training "
        "prices, real-time inference has its own list)"
    )


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
