"""Plan: search hardware × count × layout × pricing for a scenario, recommend with reasons, and report."""
