#!/usr/bin/env python3
"""Generates src/proto/schema.rs: the protobuf message tables of grid-wrapper's encoder.

    python3 scripts/gen-proto-schema.py --api DIR --apimachinery DIR > src/proto/schema.rs

DIR is a git clone (or bare git directory) of https://github.com/kubernetes/api (resp.
kubernetes/apimachinery) at the release to follow, whose Go sources are read from its HEAD with
`git show` (the header records both commits); or the Go module's directory in the module cache
(`go mod download -json k8s.io/api@v0.37.2` prints it as "Dir"; the header records the
`module@version` the directory is named after). `make e2e`'s modules pin the release:

    python3 scripts/gen-proto-schema.py \
      --api "$(go mod download -json k8s.io/api@v0.37.2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')" \
      --apimachinery ...the same for k8s.io/apimachinery@v0.37.2... > src/proto/schema.rs

The tables come from the Go types (what gogo-protobuf generated the apiserver's marshal code
from), not from the .proto files:
  * the struct tag `protobuf:"<wire>,<number>,..."` gives the field number only: its wire word
    is unreliable (discovery/v1 has `Ready *bool protobuf:"bytes,1,..."`, `AddressType
    AddressType protobuf:"bytes,4,rep,..."` on a plain string), so the kind and the
    cardinality come from the Go type, as in generated.pb.go;
  * `json:"name,..."` gives the JSON name, and its options whether Go's JSON leaves the field
    out (`omitempty`: Empty, `omitzero`: Zero); the order of the struct's fields is the JSON
    order (`json_order`: indexes into `fields`, which are in field-number order);
  * `*T` is written only when present, `[]T` per element, `map[K]V` per entry (sorted by key),
    anything else always (gogo writes the Go zero value of a non-pointer field);
  * embedded metav1.TypeMeta (no protobuf tag) is skipped: its JSON keys are listed as known;
  * metav1.Time, metav1.MicroTime, metav1.FieldsV1, resource.Quantity and intstr.IntOrString
    have hand-written (or special) marshal code in apimachinery: they are special kinds.
Stdlib only. Any Go type it does not understand is an error, not a guess.
"""

import argparse
import os
import re
import subprocess
import sys


# (package id, repo key, path in that repo)
SOURCES = [
    ("core.v1", "api", "core/v1/types.go"),
    ("discovery.v1", "api", "discovery/v1/types.go"),
    ("discovery.v1beta1", "api", "discovery/v1beta1/types.go"),
    ("networking.v1", "api", "networking/v1/types.go"),
    ("networking.v1beta1", "api", "networking/v1beta1/types.go"),
    ("meta.v1", "machinery", "pkg/apis/meta/v1/types.go"),
    ("types", "machinery", "pkg/types/uid.go"),
]

IMPORT_IDS = {
    "k8s.io/api/core/v1": "core.v1",
    "k8s.io/api/discovery/v1": "discovery.v1",
    "k8s.io/api/discovery/v1beta1": "discovery.v1beta1",
    "k8s.io/api/networking/v1": "networking.v1",
    "k8s.io/api/networking/v1beta1": "networking.v1beta1",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta.v1",
    "k8s.io/apimachinery/pkg/types": "types",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
    "k8s.io/apimachinery/pkg/runtime": "runtime",
}

# Types whose protobuf marshal code is hand-written in apimachinery.
SPECIAL = {
    "meta.v1.Time": "Time",  # time_proto.go: Timestamp{seconds}, nothing when zero
    "meta.v1.MicroTime": "MicroTime",  # micro_time_proto.go: Timestamp{seconds, nanos (µs)}
    # meta.v1.Duration ({duration=1 int64}) is not reached from the roots, so not supported:
    # reaching it stops the generator ("not found": it lives in duration.go, not types.go).
    "meta.v1.FieldsV1": "FieldsV1",  # fieldsv1.go: {raw=1} only when non-empty
    "resource.Quantity": "Quantity",  # quantity_proto.go: {string=1} always
    "intstr.IntOrString": "IntOrString",  # generated: type=1, intVal=2, strVal=3 always
}

SCALARS = {"string": "String", "bool": "Bool", "int32": "Int32", "int64": "Int64"}

# The messages the encoder starts from (everything they reach is emitted too).
ROOTS = [
    "core.v1.Node",
    "core.v1.Service",
    "core.v1.Endpoints",
    "discovery.v1.EndpointSlice",
    "discovery.v1beta1.EndpointSlice",
    "networking.v1.ServiceCIDR",
    "networking.v1beta1.ServiceCIDR",
    "meta.v1.ObjectMeta",
    "meta.v1.ListMeta",
    "meta.v1.Status",
]


def is_module_dir(repo):
    """A Go module cache directory (`.../k8s.io/api@v0.37.2`), not a git directory."""
    return "@" in os.path.basename(os.path.normpath(repo)) and not os.path.exists(
        os.path.join(repo, ".git")
    )


def git_show(repo, path):
    if is_module_dir(repo):
        with open(os.path.join(repo, path), encoding="utf-8") as f:
            return f.read()
    return subprocess.run(
        ["git", "-C", repo, "show", "HEAD:" + path], check=True, capture_output=True, text=True
    ).stdout


def git_head(repo):
    if is_module_dir(repo):
        return os.path.basename(os.path.normpath(repo)).split("@", 1)[1]
    return subprocess.run(
        ["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    out = []
    for line in src.splitlines():
        s = line.strip()
        if s.startswith("//"):
            continue
        out.append(line)
    return "\n".join(out)


def parse_imports(src):
    aliases = {}
    block = re.search(r"^import \((.*?)^\)", src, re.S | re.M)
    lines = block.group(1).splitlines() if block else []
    single = re.findall(r'^import\s+(\w+\s+)?"([^"]+)"', src, re.M)
    for alias, path in single:
        lines.append(f'{alias} "{path}"')
    for line in lines:
        m = re.match(r'\s*(\w+)?\s*"([^"]+)"', line)
        if not m:
            continue
        alias = m.group(1) or m.group(2).rsplit("/", 1)[-1]
        if m.group(2) in IMPORT_IDS:
            aliases[alias] = IMPORT_IDS[m.group(2)]
    return aliases


FIELD_RE = re.compile(r"^\s*([^`]+?)\s*`([^`]*)`\s*$")


def parse_package(pkg, src):
    """{name: ("struct", [(go_name|None, type, tags)]) or ("named", type)}"""
    src = strip_comments(src)
    imports = parse_imports(src)
    decls = {}
    for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", src, re.S | re.M):
        fields = []
        for line in m.group(2).splitlines():
            if not line.strip():
                continue
            fm = FIELD_RE.match(line)
            if not fm:
                raise SystemExit(f"{pkg}.{m.group(1)}: cannot parse field line {line!r}")
            words, tag = fm.group(1).split(), fm.group(2)
            if len(words) == 1:  # an embedded field: `metav1.TypeMeta `json:...``
                name, typ = None, words[0]
            elif len(words) == 2:
                name, typ = words
            else:
                raise SystemExit(f"{pkg}.{m.group(1)}: cannot parse field line {line!r}")
            fields.append((name, typ, tag))
        decls[m.group(1)] = ("struct", fields)
    for m in re.finditer(r"^type (\w+) ([^\s{][^\n{]*)$", src, re.M):
        if m.group(1) not in decls:
            decls[m.group(1)] = ("named", m.group(2).strip())
    return imports, decls


def tag_value(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


class Schema:
    def __init__(self, packages):
        self.packages = packages  # pkg -> (imports, decls)
        self.messages = {}  # qualified name -> list of fields, in order of emission
        self.known_only = {}  # qualified name -> JSON keys known but not encoded
        self.order = []

    def qualify(self, pkg, name):
        if "." in name:
            alias, base = name.split(".", 1)
            imports = self.packages[pkg][0]
            if alias not in imports:
                raise SystemExit(f"{pkg}: unknown import alias in {name}")
            return imports[alias] + "." + base
        return pkg + "." + name

    def kind_of(self, pkg, typ, ctx):
        """Rust expression of the Kind for a Go element type (no pointer, slice or map)."""
        if typ in SCALARS:
            return SCALARS[typ]
        q = self.qualify(pkg, typ)
        if q in SPECIAL:
            return SPECIAL[q]
        qpkg, base = q.rsplit(".", 1)
        if qpkg not in self.packages:
            raise SystemExit(f"{ctx}: type {q} is from a package not read")
        decl = self.packages[qpkg][1].get(base)
        if decl is None:
            raise SystemExit(f"{ctx}: type {q} not found")
        if decl[0] == "named":
            under = decl[1]
            if under in SCALARS:
                return self.kind_of(qpkg, under, ctx)
            raise SystemExit(f"{ctx}: named type {q} = {under} is not a scalar")
        self.visit(q)
        return f"Message(&{rust_ident(q)})"

    def resolve(self, pkg, typ, ctx):
        """(cardinality, kind expr) for a field's Go type."""
        if typ.startswith("*"):
            return "Pointer", self.kind_of(pkg, typ[1:], ctx)
        if typ.startswith("[]"):
            return "Repeated", self.kind_of(pkg, typ[2:], ctx)
        m = re.fullmatch(r"map\[([\w.]+)\](.+)", typ)
        if m:
            key = self.kind_of(pkg, m.group(1), ctx)
            if key != "String":
                raise SystemExit(f"{ctx}: map key {m.group(1)} is not a string")
            return "Map", self.kind_of(pkg, m.group(2), ctx)
        # A named type may itself be a slice or a map (type ResourceList map[...]...).
        if typ not in SCALARS:
            q = self.qualify(pkg, typ)
            qpkg, base = q.rsplit(".", 1)
            decl = self.packages.get(qpkg, (None, {}))[1].get(base)
            if decl is not None and decl[0] == "named" and decl[1] not in SCALARS:
                if decl[1].startswith(("[]", "map[")):
                    return self.resolve(qpkg, decl[1], ctx)
        return "Value", self.kind_of(pkg, typ, ctx)

    def visit(self, q):
        if q in self.messages:
            return
        pkg, base = q.rsplit(".", 1)
        decl = self.packages[pkg][1].get(base)
        if decl is None or decl[0] != "struct":
            raise SystemExit(f"{q} is not a struct")
        self.messages[q] = None  # cycle guard
        fields, known = [], []
        for name, typ, tags in decl[1]:
            json = tag_value(tags, "json")
            proto = tag_value(tags, "protobuf")
            ctx = f"{q}.{name or typ}"
            if name is None and proto is None:
                # An inlined embedded struct: only TypeMeta (apiVersion, kind) is expected.
                if self.qualify(pkg, typ) == "meta.v1.TypeMeta":
                    known += ["apiVersion", "kind"]
                    continue
                raise SystemExit(f"{ctx}: inlined embedded {typ} is not supported")
            # An embedded struct with a protobuf tag (metav1.ObjectMeta) is an ordinary field.
            if json is None or json.split(",")[0] in ("", "-"):
                if proto is not None:
                    raise SystemExit(f"{ctx}: protobuf field without a JSON name")
                continue
            json_name = json.split(",")[0]
            if proto is None or proto == "-":
                known.append(json_name)
                continue
            number = int(proto.split(",")[1])
            card, kind = self.resolve(pkg, typ, ctx)
            opts = json.split(",")[1:]
            omit = "Zero" if "omitzero" in opts else "Empty" if "omitempty" in opts else "No"
            if omit == "Zero" and card == "Value" and kind.startswith("Message("):
                # Go's omitzero on a struct: all its fields zero; not needed so far.
                raise SystemExit(f"{ctx}: omitzero on a struct is not supported")
            fields.append((number, json_name, kind, card, omit, len(fields)))
        fields.sort()
        numbers = [f[0] for f in fields]
        if len(set(numbers)) != len(numbers):
            raise SystemExit(f"{q}: duplicate field numbers {numbers}")
        self.messages[q] = fields
        self.known_only[q] = sorted(set(known))
        self.order.append(q)


def rust_ident(q):
    pkg, base = q.rsplit(".", 1)
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base)
    return (pkg.replace(".", "_") + "_" + snake).upper()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", required=True, help="git directory of k8s.io/api")
    ap.add_argument("--apimachinery", required=True, help="git directory of k8s.io/apimachinery")
    args = ap.parse_args()
    repos = {"api": args.api, "machinery": args.apimachinery}
    packages = {}
    for pkg, repo, path in SOURCES:
        packages[pkg] = parse_package(pkg, git_show(repos[repo], path))
    schema = Schema(packages)
    for root in ROOTS:
        schema.visit(root)

    out = []
    w = out.append
    w("// @generated by `python3 scripts/gen-proto-schema.py --api DIR --apimachinery DIR > src/proto/schema.rs`: do not edit.")
    w(f"// From k8s.io/api {git_head(args.api)}")
    w(f"// and k8s.io/apimachinery {git_head(args.apimachinery)}:")
    for _, repo, path in SOURCES:
        w(f"// {'k8s.io/api' if repo == 'api' else 'k8s.io/apimachinery'}/{path}")
    w("//! The protobuf message tables, one per Go struct the encoder reaches (generated).")
    w("")
    w("use super::{Card::*, Field, Kind::*, Message, Omit::*};")
    w("")
    w("/// Every message of the tables, for tests that check them against the .proto files.")
    w("pub static ALL: &[&Message] = &[")
    for q in sorted(schema.order):
        w(f"    &{rust_ident(q)},")
    w("];")
    for q in sorted(schema.order):
        w("")
        w(f"/// Go `{q}`.")
        w(f"pub static {rust_ident(q)}: Message = Message {{")
        w(f'    name: "{q}",')
        known = schema.known_only[q]
        w("    known: &[" + ", ".join(f'"{k}"' for k in known) + "],")
        w("    fields: &[")
        fields = schema.messages[q]
        for number, json_name, kind, card, omit, _ in fields:
            w(f'        Field {{ json: "{json_name}", number: {number}, kind: {kind}, card: {card}, omit: {omit} }},')
        w("    ],")
        go_order = sorted(range(len(fields)), key=lambda i: fields[i][5])
        w("    json_order: &[" + ", ".join(str(i) for i in go_order) + "],")
        w("};")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
