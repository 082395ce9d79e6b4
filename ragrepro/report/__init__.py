"""Results you can look at: paper numbers as data, paper tables with our numbers next to
the paper's, sweep plots, the static dashboard results/index.html, and `ragrepro compare`.

Entry points: `ragrepro report` (build.py), `ragrepro table NAME` (results_tables.py: both
parts of one spec, report/tables/<paper>/<table>.yaml on the config search path: the paper
grid, tables.py, and the method's own results table of its runs, whose layout is `runs`,
run_rows.py, or a method package's), `ragrepro compare RUN_A RUN_B` (compare.py). Every
run is read through runs.py; every metric fact comes from ragrepro.metrics.registry.
"""
