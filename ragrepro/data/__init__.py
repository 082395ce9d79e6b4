"""Datasets: each conf/dataset/<name>.yaml names its loader here (`hub.hub_qa`, `hub.wikitext`,
`local.*`, `vital_qa`, `vital`, `foldoc`, `fanout`) with its arguments; loaders return
`records.LMDoc`s or `records.QARecord`s. `catalog` reads a dataset by name (docs/datasets.md)."""
