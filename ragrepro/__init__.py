"""ragrepro: shared core for reproducing retrieval-augmented LM papers."""

__version__ = "0.1.0"
