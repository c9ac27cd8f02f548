"""Write cre/testing/apiserver/protofields.json: the field numbers of Kubernetes' protobuf kinds.

kube-apiserver accepts request bodies in its protobuf encoding (kubectl's typed ``create``
generators send them). Decoding one needs each message's field numbers, names and types, which
only the published ``generated.proto`` files say. This reads them from the Go module cache
(``k8s.io/api`` and ``k8s.io/apimachinery`` at the release the real control plane builds;
``go mod download`` puts them there) and writes a compact table the emulator loads:
``{"types": {message: [[number, jsonName, type, "optional"|"repeated"|"map", flags], ...]},
"groups": {apiVersion: protobuf package}}``. Map fields carry ``"map<K,V>"`` as their type.
The JSON name and the flags come from the Go struct the message is generated from (its
``json``/``protobuf`` tags in the same package's ``.go`` files), because decoding must give the
JSON kubectl would have sent for the same Go object: ``p`` the Go field is a pointer (present
means set, even to a zero value), ``o`` its JSON tag says ``omitempty`` (a zero value is left
out), ``i`` it is inlined (its fields join the parent's, as a Volume's ``VolumeSource``).

    python tools/protofields/gen.py [--release 0.34.4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "cre" / "testing" / "apiserver" / "protofields.json"

# k8s.io/api packages (directory -> API group) whose kinds the emulator decodes.
API_PACKAGES = {
    "core/v1": "", "apps/v1": "apps", "batch/v1": "batch", "rbac/v1": "rbac.authorization.k8s.io",
    "authentication/v1": "authentication.k8s.io", "policy/v1": "policy",
    "networking/v1": "networking.k8s.io", "scheduling/v1": "scheduling.k8s.io",
    "coordination/v1": "coordination.k8s.io", "autoscaling/v1": "autoscaling",
}
MACHINERY = ["pkg/apis/meta/v1", "pkg/runtime", "pkg/api/resource", "pkg/util/intstr"]

_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(optional|repeated)\s+([.\w]+)\s+(\w+)\s*=\s*(\d+)", re.M)
_MAP = re.compile(r"^\s*map<\s*([.\w]+)\s*,\s*([.\w]+)\s*>\s+(\w+)\s*=\s*(\d+)", re.M)
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float",
           "sint32", "sint64", "fixed32", "fixed64"}


def _qualify(type_: str, package: str) -> str:
    if type_ in SCALARS:
        return type_
    return type_[1:] if type_.startswith(".") else f"{package}.{type_}"


_STRUCT = re.compile(r"^type\s+(\w+)\s+struct\s*\{(.*?)^\}", re.M | re.S)
_GOFIELD = re.compile(r'^\s*(?:(\w+)\s+)?(\S+)\s+`json:"([^"]*)"\s+protobuf:"([^"]*)"`', re.M)


def go_tags(directory: Path) -> dict[tuple[str, int], tuple[str, str]]:
    """(struct, field number) -> (JSON name, flags) from the package's Go sources."""
    tags: dict[tuple[str, int], tuple[str, str]] = {}
    for source in sorted(directory.glob("*.go")):
        if source.name.endswith("_test.go"):
            continue
        for struct, body in _STRUCT.findall(source.read_text(encoding="utf-8")):
            for _name, go_type, json_tag, proto_tag in _GOFIELD.findall(body):
                number = int(proto_tag.split(",")[1])
                json_name, *options = json_tag.split(",")
                flags = ("p" if go_type.startswith("*") else "") + \
                        ("o" if "omitempty" in options else "") + \
                        ("i" if "inline" in options else "")
                tags[(struct, number)] = (json_name, flags)
    return tags


def parse(path: Path, types: dict[str, list[list[object]]]) -> str:
    text = path.read_text(encoding="utf-8")
    package = _PACKAGE.search(text)
    assert package, path
    pkg = package.group(1)
    tags = go_tags(path.parent)
    for name, body in _MESSAGE.findall(text):
        fields: list[list[object]] = []
        for label, type_, fname, number in _FIELD.findall(body):
            json_name, flags = tags.get((name, int(number)), (fname, "o"))
            fields.append([int(number), json_name or fname, _qualify(type_, pkg), label, flags])
        for key, value, fname, number in _MAP.findall(body):
            json_name, flags = tags.get((name, int(number)), (fname, "o"))
            fields.append([int(number), json_name or fname,
                           f"map<{_qualify(key, pkg)},{_qualify(value, pkg)}>", "map", flags])
        types[f"{pkg}.{name}"] = sorted(fields)
    return pkg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="0.34.4")
    args = parser.parse_args()
    cache = Path(os.environ.get("GOMODCACHE") or subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True).stdout.strip())
    types: dict[str, list[list[object]]] = {}
    groups: dict[str, str] = {}
    for directory, group in API_PACKAGES.items():
        proto = cache / f"k8s.io/api@v{args.release}" / directory / "generated.proto"
        pkg = parse(proto, types)
        version = directory.split("/")[1]
        groups[f"{group}/{version}" if group else version] = pkg
    for directory in MACHINERY:
        parse(cache / f"k8s.io/apimachinery@v{args.release}" / directory / "generated.proto",
              types)
    OUT.write_text(json.dumps({"release": args.release, "groups": groups, "types": types},
                              separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(REPO)}: {len(types)} messages, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
