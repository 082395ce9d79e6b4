"""`python -m benchmarks [NAMES] [--skip ...] [--threads N]`: see benchmarks.suite."""
from .suite import main

main()
