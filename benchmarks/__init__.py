"""Benchmarks behind `make bench` (python -m benchmarks): one module per benchmark, each with
`run() -> BenchResult` (rows for results/bench/<name>.csv, lines and targets for
results/bench/README.md); suite.py runs them and writes the summary. Library packages
(ragrepro, ralm, riches, filco) hold no benchmark code; this package imports them, never the
reverse. Targets are ratios measured side by side in one process, since absolute times on
shared machines drift."""
