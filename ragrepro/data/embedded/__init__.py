"""Embedded data files (vital_qa.jsonl); a package so that wheels include them."""
