#!/usr/bin/env python3
"""Compare two multi-document YAML renderings object by object (scripts/helm-check.sh).

usage: helm-compare.py EXPECTED ACTUAL [--skip-kind KIND]...

Objects are keyed by (apiVersion, kind, namespace, name) and compared as parsed data: key order
and comments do not matter, every value does, and so does list order but for the lists the
apiserver keeps as maps keyed by a field (volumes and env by name, volumeMounts by mountPath),
whose order kustomize's patches change without meaning. ConfigMap data that is itself YAML
(a kubeconfig) is compared parsed too, so its indentation style does not matter but its content
does. Prints each missing, extra or differing object (a unified diff of both sides, keys
sorted); exits 1 if there is any.
"""
import difflib
import sys

import yaml


# Lists of the pod spec the apiserver merges by a key (x-kubernetes-list-type: map or a patch
# merge key): their order carries no meaning.
KEYED_LISTS = {"volumes": "name", "env": "name", "volumeMounts": "mountPath"}


def normalise(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            v = normalise(v)
            key = KEYED_LISTS.get(k)
            if key and isinstance(v, list) and all(isinstance(i, dict) and key in i for i in v):
                v = sorted(v, key=lambda i: str(i[key]))
            out[k] = v
        return out
    if isinstance(node, list):
        return [normalise(i) for i in node]
    return node


def load(path, skip):
    objs = {}
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc:
                continue
            if doc.get("kind") in skip:
                continue
            meta = doc.get("metadata") or {}
            key = (doc.get("apiVersion"), doc.get("kind"), meta.get("namespace", ""), meta.get("name"))
            if key in objs:
                sys.exit(f"{path}: {key} twice")
            if doc.get("kind") == "ConfigMap":
                for k, v in (doc.get("data") or {}).items():
                    if k.endswith(".conf") and isinstance(v, str):
                        doc["data"][k] = yaml.safe_load(v)
            objs[key] = normalise(doc)
    return objs


def main():
    args = sys.argv[1:]
    skip = set()
    while "--skip-kind" in args:
        i = args.index("--skip-kind")
        skip.add(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    want, got = load(args[0], skip), load(args[1], skip)
    bad = 0
    for key in sorted(set(want) | set(got), key=str):
        name = "/".join(str(k) for k in key if k)
        if key not in got:
            print(f"MISSING from {args[1]}: {name}")
            bad += 1
        elif key not in want:
            print(f"EXTRA in {args[1]}: {name}")
            bad += 1
        elif want[key] != got[key]:
            a = yaml.safe_dump(want[key], sort_keys=True).splitlines()
            b = yaml.safe_dump(got[key], sort_keys=True).splitlines()
            print(f"DIFFERS: {name}")
            print("\n".join(difflib.unified_diff(a, b, args[0], args[1], lineterm="", n=2)))
            bad += 1
    print(f"{len(want)} objects expected, {len(got)} rendered, {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
