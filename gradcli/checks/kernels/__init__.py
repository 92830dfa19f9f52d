"""A low-precision kernel checked against a reference implementation (``reference=``)."""
