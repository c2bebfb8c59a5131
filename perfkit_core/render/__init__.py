"""Renderers: turn summary DataFrames into text (and, later, HTML and exports)."""
