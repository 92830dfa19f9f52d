"""Pictures: the data behind `gradcli plot` and `gradcli steps` (data.py, no plotting library) and
their rendering (render.py, the optional plot extra)."""
