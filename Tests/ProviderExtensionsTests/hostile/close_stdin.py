"""Answers ``initialize``, then closes its standard input and lives on:
the daemon's next write meets a pipe with no reader (EPIPE, and SIGPIPE
for a writer that does not ignore it)."""

import os
import sys
import time

from base import answer

line = sys.stdin.readline()
answer(1, {"protocolVersion": "1.0", "name": "hostile", "version": "0", "capabilities": {"maxPageSize": 10}})
os.close(0)
sys.stdin = None
time.sleep(60)
