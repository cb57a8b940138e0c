"""Environments: the toolkits' creators (``toolkits``), the old-gym layer, batched actions, Unity."""
