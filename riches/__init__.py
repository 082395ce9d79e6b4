"""RICHES (Jain et al., 2024): retrieval interlaced with sequence generation.

index (suffix array over token ids) -> keys (retrieval-key types) -> constraint (marker
state machine + allowed tokens, also as a transformers LogitsProcessor) -> beam (adaptive
constrained beam search with a KV cache) -> decoding (one answer per question) -> pipeline
(one typed target per variant: riches, no_retrieval, dense_reader, iterative; settings in
settings.py, baselines in baselines.py).
"""
