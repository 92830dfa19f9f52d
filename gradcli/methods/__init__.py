"""The independent ways gradcli differentiates a graph."""
