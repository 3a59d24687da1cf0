#!/usr/bin/env python3
"""Charts of one run beside its table: Benchmarks/Plots/plots.py RESULTS_FOLDER

Reads RESULTS_FOLDER/latest.json (and distributions.json, every sample behind the latency
rows) and draws, as SVG next to it, the rows where Overtime has peers or a ceiling in the
same run: the scheduler's throughput against APScheduler, huey and the SQLite ceiling (log
scale), its lateness against the peers, its footprint at rest; the fleet's against
procrastinate, PgQueuer, Oban, APScheduler and pgbench; the distributions (CDFs) of the
scheduler's lateness and the fleet's claim latency, Overtime's and the peers'; and the grant
rows against libuv, SwiftNIO, Dispatch and Task. Appends a "Plots" section that embeds them
to latest.md. A row the run did not measure is left out of its chart.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

folder = sys.argv[1]
results = json.load(open(os.path.join(folder, "latest.json")))
plt.rcParams["svg.hashsalt"] = "overtime"  # the same run draws the same file
OVERTIME, PEER, LIMIT = "#d9480f", "#868e96", "#1c7ed6"
# The peers' lines in the distribution charts: none of them orange, Overtime's colour.
PEER_LINES = ["#1971c2", "#2b8a3e", "#7048e8", "#c2255c", "#495057", "#0c8599"]


def colour(name):
    if name.startswith("overtime"):
        return OVERTIME
    if "limit" in name or name == "ceiling":
        return LIMIT
    return PEER


def bars(axis, metric, title, unit, log=False):
    values = results.get(metric, {})
    if not values:
        axis.set_visible(False)
        return False
    names = list(values)
    numbers = [max(values[name], 1e-3) if log else values[name] for name in names]
    axis.barh(names, numbers, color=[colour(name) for name in names])
    axis.invert_yaxis()
    if log:
        axis.set_xscale("log")
    axis.set_title(title, fontsize=10)
    axis.set_xlabel(unit, fontsize=9)
    axis.tick_params(labelsize=8)
    for index, number in enumerate(numbers):
        axis.text(number, index, f" {values[names[index]]:,.0f}", va="center", fontsize=7)
    return True


def chart(name, panels, height):
    figure, axes = plt.subplots(len(panels), 1, figsize=(7.5, height), squeeze=False)
    drawn = [bars(axes[index][0], *panel) for index, panel in enumerate(panels)]
    if not any(drawn):
        plt.close(figure)
        return None
    figure.tight_layout()
    path = os.path.join(folder, name)
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)
    return name


def distributions(name, panels, height):
    """One panel per metric: each implementation's samples as a CDF, log x."""
    path = os.path.join(folder, "distributions.json")
    samples = json.load(open(path)) if os.path.exists(path) else {}
    panels = [panel for panel in panels if samples.get(panel[0])]
    if not panels:
        return None
    figure, axes = plt.subplots(len(panels), 1, figsize=(7.5, height), squeeze=False)
    for index, (metric, title, unit) in enumerate(panels):
        axis = axes[index][0]
        peers = iter(PEER_LINES)
        for implementation, values in sorted(samples[metric].items(), key=lambda item: item[0] != "overtime"):
            values = sorted(max(value, 1e-3) for value in values)
            fractions = [(rank + 1) / len(values) for rank in range(len(values))]
            axis.step(values, fractions, where="post", label=f"{implementation} ({len(values):,})",
                      color=OVERTIME if implementation == "overtime" else next(peers, PEER),
                      linewidth=2 if implementation == "overtime" else 1)
        axis.set_xscale("log")
        axis.set_ylim(0, 1.01)
        axis.axhline(0.99, color="#adb5bd", linewidth=0.5, linestyle="--")
        axis.set_title(title, fontsize=10)
        axis.set_xlabel(unit, fontsize=9)
        axis.set_ylabel("fraction of runs", fontsize=9)
        axis.tick_params(labelsize=8)
        axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(os.path.join(folder, name), format="svg", metadata={"Date": None})
    plt.close(figure)
    return name


drawn = [
    chart(
        "scheduler-throughput.svg",
        [
            ("scheduler_runs_per_sec", "One-shots due at once, run and completed durably", "runs/s (log)", True),
            ("scheduler_submit_per_sec", "Durable submits", "requests/s (log)", True),
        ],
        6),
    chart(
        "scheduler-lateness-and-rest.svg",
        [
            ("scheduler_lateness_p99_us", "Lateness p99 of runs due over time, many pending", "µs (log)", True),
            ("scheduler_idle_wakeups_per_sec", "Wake-ups at rest, requests due in an hour", "wake-ups/s", False),
            ("scheduler_resident_mb", "Resident growth with requests pending", "MB", False),
        ],
        7),
    chart(
        "fleet.svg",
        [
            ("fleet_runs_per_sec", "Fleet: one-shots due at once on 4 workers, PostgreSQL", "runs/s (log)", True),
            ("fleet_claim_latency_p99_ms", "Fleet: claim latency p99, due time → handler start", "ms (log)", True),
            ("fleet_idle_wakeups_per_sec", "Fleet: wake-ups at rest, the busiest worker", "wake-ups/s", False),
        ],
        7),
    distributions(
        "latency-distributions.svg",
        [
            ("scheduler_lateness_p99_us", "Scheduler on SQLite: run start after its due time (CDF)", "µs (log)"),
            ("fleet_claim_latency_p99_ms", "Fleet on PostgreSQL: due time → handler start (CDF)", "ms (log)"),
        ],
        7),
    chart(
        "grants.svg",
        [
            ("grant_begin_end_pairs_per_sec", "Begin+end pairs with 1,000,000 open", "pairs/s (log)", True),
            ("expiration_lateness_p99_us", "Expiration lateness p99", "µs (log)", True),
        ],
        6),
]
drawn = [name for name in drawn if name]
with open(os.path.join(folder, "latest.md"), "a") as table:
    table.write("\n## Plots\n\nBars: orange Overtime, grey its peers, blue a ceiling. Distributions: Overtime the thick orange line.\n\n")
    for name in drawn:
        table.write(f"![{name[:-4]}]({name})\n\n")
print("plots:", ", ".join(drawn) or "none (no row with peers in this run)")
