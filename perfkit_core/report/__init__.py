"""Reports: one report model per run (or comparison), and the renderers that only format it.

- ``text``, ``html``: the text and HTML renderers; ``json``: JSON-ready values.
- ``export``: chrome traces, folded stacks, and every summary as CSV, Parquet or JSON.
"""
