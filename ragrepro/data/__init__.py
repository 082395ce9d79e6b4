"""Datasets: one record type per task, from the hub, local files or the embedded default."""
