"""`gradcli check`: registering, running and reporting gradient checks of numpy code."""
