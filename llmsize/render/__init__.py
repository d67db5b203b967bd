"""Rendering at the edge: rich tables and JSON. rich is imported inside functions."""
