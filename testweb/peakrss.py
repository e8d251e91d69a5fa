"""Run a command and record its own peak RSS: ``python -m testweb.peakrss RESULT -- CMD...``.

A child's ``ru_maxrss`` also counts the process it was forked from: Linux keeps the high-water
mark of the old image at ``exec``. A pytest process can hold hundreds of MB by the time it starts
a crawl, so a crawl forked from it would report the test runner's size, not its own. Forked
from this small launcher instead, the crawl's ``ru_maxrss`` is its own (plus this launcher's
few MB). RESULT receives ``{"returncode": N, "peak_kib": N}``; the exit status is the child's.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    """Fork, exec the command, wait for it and write what it cost."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: python -m testweb.peakrss RESULT -- CMD...\n")
        return 2
    result, cmd = argv[0], argv[2:]
    pid = os.fork()
    if pid == 0:  # the child: becomes the command, with this small image as its "before"
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(result, "w", encoding="utf-8") as f:
        json.dump({"returncode": code, "peak_kib": usage.ru_maxrss}, f)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
