"""FilCo (Wang et al., 2023): learning to filter retrieved context for RAG.

Pure pieces: `split` (sentences), `measures` (StrInc, Lexical, CXMI and their official-code
variants), `prompts` (one format per task), `silver` (silver contexts). Model edges:
`cxmi` (batched scoring), `train` (M_ctx / M_gen fine-tuning), `pipeline` (experiments),
`tables` (result tables with the paper's numbers beside ours).
"""
