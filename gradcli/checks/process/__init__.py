"""The model processes of ``gradcli check``: one per file, forked or spawned, timed and reaped."""
