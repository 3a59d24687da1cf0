"""The server's time by statement and protocol step in a PostgreSQL log written with
log_min_duration_statement = 0 and log_line_prefix '%m [%p] ', between two timestamps.

    statement-times.py LOG FROM TO      (timestamps as the log writes them, UTC)
"""

import collections
import re
import sys

LINE = re.compile(r"^(\S+ \S+) UTC \[\d+\] LOG:  duration: ([\d.]+) ms  (parse|bind|execute) [^:]*: (.*)$")
# What each of the store's statements on the way from a due time to a start begins with or holds.
KINDS = [
    ("claim (due)", "WITH due AS"),
    ("start or end (recordRuns)", "started AS ("),
    ("next due (nextDue)", "(SELECT false, identifier"),
]

log, start, end = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(log, errors="replace").read().split("\n")
times = collections.defaultdict(list)
for index, line in enumerate(lines):
    match = LINE.match(line)
    if not match or not (start <= match.group(1) <= end):
        continue
    text = match.group(4)
    follow = index + 1
    while follow < len(lines) and lines[follow].startswith("\t"):
        text += " " + lines[follow].strip()
        follow += 1
    kind = next((name for name, marker in KINDS if marker in text), "other")
    times[(kind, match.group(3))].append(float(match.group(2)) * 1000)
print(f"{'statement':28s} {'step':8s} {'count':>6s} {'mean µs':>8s} {'p50 µs':>8s} {'total ms':>9s}")
for (kind, step), values in sorted(times.items(), key=lambda item: -sum(item[1])):
    values.sort()
    print(
        f"{kind:28s} {step:8s} {len(values):6d} {sum(values) / len(values):8.0f} {values[len(values) // 2]:8.0f}"
        f" {sum(values) / 1000:9.1f}"
    )
