"""Answers ``initialize``, then closes its standard input and lives on:
the daemon's next write meets a pipe with no reader (EPIPE, and SIGPIPE
for a writer that does not ignore it)."""

import os
import sys
import time

from base import answer

line = sys.stdin.readline()
# Closed before the answer: once the daemon sees it running, every write
# it makes finds no reader.
os.close(0)
sys.stdin = None
answer(1, {"protocolVersion": "1.0", "name": "hostile", "version": "0", "capabilities": {"maxPageSize": 10}})
time.sleep(60)
