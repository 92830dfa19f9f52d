"""The comparisons of a check: full and fast mode, order 2, the Taylor test, the judgement of entries."""
