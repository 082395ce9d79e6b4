"""RICHES (Jain et al., 2024): retrieval interlaced with sequence generation.

index (suffix array over token ids) -> keys (retrieval-key types) -> constraint (marker
state machine + allowed tokens, also as a transformers LogitsProcessor) -> beam (adaptive
constrained beam search with a KV cache) -> pipeline (experiments and baselines).
"""
