"""Tracing numpy code: arrays that record every numpy call so gradcli can differentiate it."""
