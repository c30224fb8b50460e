"""Versioned records that cross a process boundary, and their language-neutral JSON Schemas.

The Python classes live in ``streamcrawl.schemas.records``; ``schemas/json/*.schema.json`` are
generated from them (``python -m streamcrawl.schemas.generate``) and a test fails when the two drift
apart.
"""
