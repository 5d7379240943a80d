"""Reads requests and never answers any, ``initialize`` included."""

import sys

for _line in sys.stdin:
    pass
