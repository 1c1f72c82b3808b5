#!/usr/bin/env python3
"""The monitoring half of scripts/helm-check.sh (PyYAML).

  monitoring-check.py rules RENDERED OUT
      the groups of the PrometheusRule in a `helm template` rendering, as a promtool rules file
  monitoring-check.py dashboard DASHBOARD_JSON OUT
      every panel query of the Grafana dashboard as a recording rule, so that `promtool check
      rules` parses each one (Grafana's variables replaced by what they stand for)
  monitoring-check.py names EXPOSITION RULES DASHBOARD_JSON
      every metric name the rules and the dashboard use appears in a real /metrics exposition
  monitoring-check.py runbook RULES RUNBOOK_MD
      every alert has a section `## <alert>` in the runbook, and its runbook_url that anchor
"""
import json
import re
import sys

import yaml

# Grafana's variables in the dashboard's queries, and a value of each that PromQL accepts.
GRAFANA_VARS = {"$__rate_interval": "5m", "$job": ".*", "$instance": ".*"}
# The metric families grid-wrapper exports; a name with one of these prefixes in a query must
# be one of its samples (histograms included by their _bucket/_sum/_count samples).
NAME = re.compile(r"\b((?:grid_wrapper|process)_[a-z0-9_]+)\b")
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def rules(rendered, out):
    groups = [
        doc["spec"]["groups"]
        for doc in yaml.safe_load_all(open(rendered, encoding="utf-8"))
        if doc and doc.get("kind") == "PrometheusRule"
    ]
    if len(groups) != 1:
        sys.exit(f"{rendered}: {len(groups)} PrometheusRules, expected 1")
    yaml.safe_dump({"groups": groups[0]}, open(out, "w", encoding="utf-8"), sort_keys=False)
    print(f"{out}: {sum(len(g['rules']) for g in groups[0])} rules")


def panel_queries(path):
    dash = json.load(open(path, encoding="utf-8"))
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def dashboard(path, out):
    records = []
    for i, (title, expr) in enumerate(panel_queries(path)):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        if "$" in expr:
            sys.exit(f"{path}: panel {title!r}: unknown variable in {expr!r}")
        records.append({"record": f"dashboard:query_{i}", "expr": expr})
    yaml.safe_dump({"groups": [{"name": "dashboard-queries", "rules": records}]},
                   open(out, "w", encoding="utf-8"), sort_keys=False)
    print(f"{out}: {len(records)} panel queries")


def names(exposition, rules_path, dash_path):
    have = set()
    for line in open(exposition, encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            have.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    used = {}
    for group in yaml.safe_load(open(rules_path, encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            for n in NAME.findall(QUOTED.sub('""', rule["expr"])):
                used.setdefault(n, set()).add(f"alert {rule['alert']}")
    for title, expr in panel_queries(dash_path):
        for n in NAME.findall(QUOTED.sub('""', expr)):
            used.setdefault(n, set()).add(f"panel {title!r}")
    missing = sorted(n for n in used if n not in have)
    for n in missing:
        print(f"NOT IN /metrics: {n}, used by {', '.join(sorted(used[n]))}")
    print(f"{len(used)} metric names used by the rules and the dashboard, "
          f"{len(have)} in the exposition, {len(missing)} missing")
    sys.exit(1 if missing else 0)


def runbook(rules_path, runbook_md):
    sections = {
        line[3:].strip() for line in open(runbook_md, encoding="utf-8") if line.startswith("## ")
    }
    bad = 0
    for group in yaml.safe_load(open(rules_path, encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            name = rule["alert"]
            url = rule.get("annotations", {}).get("runbook_url", "")
            if name not in sections:
                print(f"{runbook_md}: no section '## {name}'")
                bad += 1
            if not url.endswith("#" + name.lower()):
                print(f"alert {name}: runbook_url {url!r} does not end with #{name.lower()}")
                bad += 1
    print(f"{len(sections)} runbook sections, {bad} problems")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "rules" and len(args) == 2:
        rules(*args)
    elif cmd == "dashboard" and len(args) == 2:
        dashboard(*args)
    elif cmd == "names" and len(args) == 3:
        names(*args)
    elif cmd == "runbook" and len(args) == 2:
        runbook(*args)
    else:
        sys.exit(__doc__)
