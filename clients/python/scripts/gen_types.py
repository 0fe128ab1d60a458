"""Generates src/ontime/_types.py (TypedDicts) from apiv1/openapi.json.

    python3 scripts/gen_types.py          # write it
    python3 scripts/gen_types.py --check  # exit 1 when it is not current

Standard library only, like the client. Every schema of
components.schemas becomes a TypedDict (an object), a Literal (an enum) or
an alias; required keys are plain, the others NotRequired in the
two-class form that works on Python 3.8 (a base with the required keys,
a subclass with total=False). A schema without a type (any JSON value)
is Any.
"""
from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent.parent.parent / "apiv1" / "openapi.json"
OUT = HERE.parent / "src" / "ontime" / "_types.py"

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


class Gen:
    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.blocks: list[str] = []
        self.done: set[str] = set()

    def pyname(self, name: str) -> str:
        return "".join(p[:1].upper() + p[1:] for p in name.replace("-", "_").replace(".", "_").split("_"))

    def type_of(self, s: dict, hint: str) -> str:
        if "$ref" in s:
            return repr(s["$ref"].rsplit("/", 1)[1])
        if "const" in s:
            return f"Literal[{json.dumps(s['const'])}]".replace("false", "False").replace("true", "True")
        if "enum" in s:
            return "Literal[" + ", ".join(json.dumps(v) for v in s["enum"]) + "]"
        for k in ("oneOf", "anyOf"):
            if k in s:
                # An inline variant is named for what it holds: the error
                # variant of a batch item is BatchItemError.
                return self.union([self.type_of(x, hint + ("Error" if "error" in x.get("properties", {}) else f"Variant{i}")) for i, x in enumerate(s[k])])
        t = s.get("type")
        if t is None:
            return "Any"
        if isinstance(t, list):
            return self.union([self.type_of({**s, "type": x}, hint) for x in t])
        if t == "array":
            return f"List[{self.type_of(s.get('items', {}), hint + 'Item')}]"
        if t == "object":
            if s.get("properties"):
                self.typed_dict(hint, s)
                return repr(hint)
            ap = s.get("additionalProperties")
            return f"Dict[str, {self.type_of(ap, hint + 'Value') if isinstance(ap, dict) else 'Any'}]"
        return SCALARS[t]

    def union(self, ts: list[str]) -> str:
        out: list[str] = []
        for t in ts:
            if t not in out:
                out.append(t)
        if "None" in out and len(out) == 2:
            return f"Optional[{[t for t in out if t != 'None'][0]}]"
        return out[0] if len(out) == 1 else "Union[" + ", ".join(out) + "]"

    def typed_dict(self, name: str, s: dict) -> None:
        if name in self.done:
            return
        self.done.add(name)
        req = set(s.get("required", []))
        props = s.get("properties", {})
        fields = [(k, self.type_of(v, name + self.pyname(k)), v.get("description", "")) for k, v in props.items()]
        doc = s.get("description", "")
        lines: list[str] = []
        if any(not k.isidentifier() or keyword.iskeyword(k) for k, _, _ in fields):
            # A key such as "from" cannot be a class attribute: the
            # functional form of TypedDict takes any string.
            def entries(fs: list) -> str:
                return ", ".join(f"{k!r}: {t}" for k, t, _ in fs)

            # Every key required, or (some optional) none marked required.
            total = "" if all(f[0] in req for f in fields) else ", total=False"
            self.blocks.append(f"{name} = TypedDict({name!r}, {{{entries(fields)}}}{total})")
            return

        def body(fs: list) -> list[str]:
            b: list[str] = []
            for k, t, d in fs:
                b.append(f"    {k}: {t}")
                if d:
                    b.append(f"    \"\"\"{d.strip()}\"\"\"".replace("\\", "\\\\"))
            return b or ["    pass"]

        required = [f for f in fields if f[0] in req]
        optional = [f for f in fields if f[0] not in req]
        if required and optional:
            lines.append(f"class _{name}Required(TypedDict):")
            lines += body(required)
            lines.append("")
            lines.append("")
            lines.append(f"class {name}(_{name}Required, total=False):")
            if doc:
                lines.append(f"    \"\"\"{doc.strip()}\"\"\"".replace("\\", "\\\\"))
            lines += body(optional)
        else:
            lines.append(f"class {name}(TypedDict{', total=False' if optional else ''}):")
            if doc:
                lines.append(f"    \"\"\"{doc.strip()}\"\"\"".replace("\\", "\\\\"))
            lines += body(required or optional)
        self.blocks.append("\n".join(lines))

    def run(self) -> str:
        for name, s in self.doc["components"]["schemas"].items():
            if s.get("type") == "object" and s.get("properties"):
                self.typed_dict(name, s)
            else:
                t = self.type_of(s, name)
                self.blocks.append(f"{name} = {t}" if not t.startswith("'") else f"{name} = {t[1:-1]}")
        head = (
            '"""The bodies of ontime\'s HTTP API v1, generated from apiv1/openapi.json\n'
            "by scripts/gen_types.py: do not edit; run it again after the document changes.\"\"\"\n"
            "# fmt: off\n"
            "from __future__ import annotations\n\n"
            "from typing import Any, Dict, List, Literal, Optional, TypedDict, Union\n\n\n"
        )
        return head + "\n\n\n".join(self.blocks) + "\n"


def main() -> int:
    src = Gen(json.loads(DOC.read_text(encoding="utf-8"))).run()
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != src:
            print(f"{OUT.relative_to(HERE.parent)} is not current with apiv1/openapi.json: run python3 scripts/gen_types.py and commit it", file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(HERE.parent)} is current with apiv1/openapi.json")
        return 0
    OUT.write_text(src, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
