"""Renderers: pure functions from a report to text. Nothing else in gradcli prints."""
