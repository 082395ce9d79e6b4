"""Benchmarks (`make bench`): each returns rows for results/bench/<name>.csv and lines for the
summary. Targets are ratios measured side by side in one process, since absolute times on
shared machines drift."""
