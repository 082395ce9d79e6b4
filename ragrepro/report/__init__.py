"""Results you can look at: paper numbers as data, paper tables with our numbers next to
the paper's, sweep plots, the static dashboard results/index.html, and `ragrepro compare`.

Entry points: `ragrepro report` (build.py), `ragrepro table NAME` (tables.py),
`ragrepro table --method NAME` (results_tables.py: every method's own results table, one
YAML each under conf/report/results/), `ragrepro compare RUN_A RUN_B` (compare.py).
"""
