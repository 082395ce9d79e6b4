"""Results you can look at: paper numbers as data, paper tables with our numbers next to
the paper's, sweep plots, the static dashboard results/index.html, and `ragrepro compare`.

Entry points: `ragrepro report` (build.py), `ragrepro table NAME` (tables.py),
`ragrepro compare RUN_A RUN_B` (compare.py); other builders use paper.lookup().
"""
