"""The core every layer stands on: the primitive table, the expression graph and its one interpreter,
the parser, the named constants, errors and atomic files."""
