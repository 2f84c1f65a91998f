#!/usr/bin/python3
"""Check a scrape of embgw's metrics endpoint (doc/gateway.md, "Metrics").

    metrics_check.py SCRAPE [--expect 'NAME{LABEL="V",..}=VALUE']...
                            [--dashboard JSON [--names-from SCRAPE]...]

The page must parse as OpenMetrics (prometheus_client's strict parser:
TYPE before samples, _total on counters, # EOF), every family must have
its HELP and TYPE lines and an embgw_ name, every histogram's buckets must
be cumulative and end in +Inf equal to its _count. --expect sums the
samples named NAME whose labels include the given ones and wants exactly
VALUE. --dashboard: every embgw_ name a Grafana dashboard's queries use is
a sample of the scrape (or of a --names-from scrape). Prints one line per problem; exit 1 if any.
"""
import argparse
import json
import math
import re
import sys

try:
    from prometheus_client.openmetrics.parser import \
        text_string_to_metric_families
except ImportError as e:  # said where the case's message shows it
    print("no OpenMetrics parser (%s): scripts/deps.sh installs "
          "python3-prometheus-client" % e)
    sys.exit(2)

SELECTOR = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?=(.+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"\s*,?')


def parse_selector(text):
    m = SELECTOR.match(text)
    if not m:
        raise SystemExit(f"metrics_check: bad --expect {text!r}")
    labels = {}
    body = m.group(2) or ""
    pos = 0
    while pos < len(body):
        lm = LABEL.match(body, pos)
        if not lm:
            raise SystemExit(f"metrics_check: bad labels in {text!r}")
        labels[lm.group(1)] = lm.group(2)
        pos = lm.end()
    return m.group(1), labels, float(m.group(3))


def check(text, expects, dashboard, extra_names=frozenset()):
    problems = []
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as e:
        return [f"not OpenMetrics: {e}"], 0
    samples = [s for f in families for s in f.samples]
    for f in families:
        if not f.name.startswith("embgw_"):
            problems.append(f"family {f.name}: not an embgw_ name")
        for what in ("TYPE", "HELP"):
            if not re.search(rf"^# {what} {re.escape(f.name)} ", text, re.M):
                problems.append(f"family {f.name}: no # {what} line")
        if f.type != "histogram":
            continue
        series = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, {"buckets": [], "count": None})
            if s.name.endswith("_bucket"):
                series[key]["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                series[key]["count"] = s.value
        for key, h in series.items():
            b = h["buckets"]
            if not b or not math.isinf(b[-1][0]):
                problems.append(f"{f.name}{dict(key)}: no +Inf bucket")
                continue
            if any(b[i][0] >= b[i + 1][0] or b[i][1] > b[i + 1][1]
                   for i in range(len(b) - 1)):
                problems.append(f"{f.name}{dict(key)}: buckets not cumulative: {b}")
            if h["count"] is not None and h["count"] != b[-1][1]:
                problems.append(f"{f.name}{dict(key)}: _count {h['count']} "
                                f"!= +Inf bucket {b[-1][1]}")
    for name, labels, want in expects:
        match = [s for s in samples if s.name == name and
                 all(s.labels.get(k) == v for k, v in labels.items())]
        got = sum(s.value for s in match)
        if not match or got != want:
            problems.append(f"{name}{labels}: {got if match else 'absent'}, "
                            f"expected {want:g}")
    if dashboard:
        with open(dashboard, encoding="utf-8") as fd:
            board = json.load(fd)
        exprs = []

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == "expr" and isinstance(v, str):
                        exprs.append(v)
                    else:
                        walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(board)
        names = {s.name for s in samples} | extra_names
        used = {n for e in exprs for n in re.findall(r"\bembgw_[a-z0-9_]+", e)}
        if not used:
            problems.append(f"{dashboard}: no embgw_ series in its queries")
        for n in sorted(used - names):
            problems.append(f"{dashboard}: uses {n}, which the scrape lacks")
    return problems, len(families)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scrape")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--dashboard")
    ap.add_argument("--names-from", action="append", default=[],
                    help="more scrapes whose series the dashboard may use")
    a = ap.parse_args()
    with open(a.scrape, encoding="utf-8") as fd:
        text = fd.read()
    extra = []
    for other in a.names_from:
        with open(other, encoding="utf-8") as fd:
            extra.extend(s.name for f in text_string_to_metric_families(fd.read())
                         for s in f.samples)
    problems, nfam = check(text, [parse_selector(e) for e in a.expect],
                           a.dashboard, set(extra))
    for p in problems:
        print(p)
    if not problems:
        print(f"ok: {nfam} families, {len(a.expect)} values as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
