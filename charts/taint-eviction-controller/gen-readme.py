#!/usr/bin/env python3
"""Writes the chart's README.md from values.yaml (and Chart.yaml's version): an introduction,
the install commands and a table of every value (key, type, default, description).

Usage: gen-readme.py [OUTPUT]   (default: README.md beside this script)

The convention in values.yaml, as helm-docs has it:
- a comment line `# -- text` starts the description of the key on the next non-comment line;
  further comment lines up to that key continue it. `# -- (type) text` names the type (the
  default's otherwise). Comment lines before a `# --` line are notes for values.yaml only.
- Every key is described, or lies inside a described map (whose default is then shown whole,
  as `resources`). An undescribed map must have every key in it described. A key that breaks
  this is an error (exit 1): the table lists every value.
- Paths such as docs/policy.md or deploy/networkpolicy.yaml in a description become links.

values.yaml is read with a small reader of the YAML it uses (standard library only, like the
rest of the build's scripts): block maps by indentation, block lists, flow `{...}` and `[...]`,
plain and quoted scalars. Anything else is an error naming the line. ctest helm.readme
(tests/helm/readme_test.sh) regenerates the file and fails while it differs from README.md.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


class ValuesError(Exception):
    pass


# --- reading the YAML of values.yaml --------------------------------------------------------

def scalar(text, where):
    """A plain or quoted scalar as YAML 1.1 (Helm's reader) types it."""
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    if text.lower() in ("yes", "no", "on", "off", "y", "n"):
        raise ValuesError(f"{where}: {text!r} is a boolean to Helm's YAML 1.1 reader: quote it "
                          "or write true/false")
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def flow(text, where):
    """A flow collection or scalar: {a: b, c: [d]}, ["x", y]."""
    pos = 0

    def skip():
        nonlocal pos
        while pos < len(text) and text[pos] == " ":
            pos += 1

    def item(stops):
        nonlocal pos
        skip()
        if pos >= len(text):
            raise ValuesError(f"{where}: unfinished flow collection")
        c = text[pos]
        if c == "{":
            pos += 1
            out = {}
            skip()
            if text[pos:pos + 1] == "}":
                pos += 1
                return out
            while True:
                key = item(":")
                if text[pos:pos + 1] != ":":
                    raise ValuesError(f"{where}: expected ':' in a flow map")
                pos += 1
                out[key] = item(",}")
                skip()
                if text[pos:pos + 1] == ",":
                    pos += 1
                    continue
                if text[pos:pos + 1] == "}":
                    pos += 1
                    return out
                raise ValuesError(f"{where}: expected ',' or '}}' in a flow map")
        if c == "[":
            pos += 1
            out = []
            skip()
            if text[pos:pos + 1] == "]":
                pos += 1
                return out
            while True:
                out.append(item(",]"))
                skip()
                if text[pos:pos + 1] == ",":
                    pos += 1
                    continue
                if text[pos:pos + 1] == "]":
                    pos += 1
                    return out
                raise ValuesError(f"{where}: expected ',' or ']' in a flow list")
        if c in "\"'":
            end = pos + 1
            while end < len(text):
                if text[end] == "\\" and c == '"':
                    end += 2
                    continue
                if text[end] == c:
                    if c == "'" and text[end + 1:end + 2] == "'":
                        end += 2
                        continue
                    break
                end += 1
            token, pos = text[pos:end + 1], end + 1
            return scalar(token, where)
        end = pos
        while end < len(text) and text[end] not in stops and not (
                text[end] == ":" and ":" in stops and text[end + 1:end + 2] in ("", " ")):
            end += 1
        token, pos = text[pos:end].strip(), end
        return scalar(token, where)

    value = item("")
    skip()
    if pos != len(text):
        raise ValuesError(f"{where}: unexpected {text[pos:]!r}")
    return value


def strip_comment(text):
    """The text without a trailing ` # comment` outside quotes."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i].rstrip()
    return text.rstrip()


class Line:
    def __init__(self, number, indent, text, doc):
        self.number, self.indent, self.text, self.doc = number, indent, text, doc


def lines_of(path):
    """The content lines (number, indent, text) with the `# --` description above each."""
    out, doc, in_doc = [], None, False
    for number, raw in enumerate(open(path, encoding="utf-8"), 1):
        stripped = raw.strip()
        if not stripped:
            doc, in_doc = None, False
            continue
        if stripped.startswith("#"):
            body = stripped[1:]
            if body.startswith(" -- ") or body == " --":
                doc, in_doc = [body[4:].strip()], True
            elif in_doc:
                doc.append(body.strip())
            continue
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise ValuesError(f"values.yaml:{number}: a tab in the indentation")
        indent = len(raw) - len(raw.lstrip(" "))
        out.append(Line(number, indent, strip_comment(raw.strip()), doc))
        doc, in_doc = None, False
    return out


class Node:
    """A key of values.yaml: its path, value and description."""

    def __init__(self, path, value, doc, number, children=None):
        self.path, self.value, self.doc, self.number = path, value, doc, number
        self.children = children or []


def parse_block(lines, i, indent, path):
    """The block at lines[i:] indented by `indent`: (value, child Nodes, next i)."""
    if i < len(lines) and lines[i].indent == indent and lines[i].text.startswith("- "):
        items = []
        while i < len(lines) and lines[i].indent == indent and lines[i].text.startswith("- "):
            line = lines[i]
            rest = line.text[2:]
            if re.match(r"^[^\s\"'{\[][^:]*:( |$)", rest):
                # A map in a list item: its first key on the dash's line.
                sub = [Line(line.number, indent + 2, rest, None)]
                j = i + 1
                while j < len(lines) and lines[j].indent > indent:
                    sub.append(lines[j])
                    j += 1
                value, _, k = parse_block(sub, 0, indent + 2, path)
                if k != len(sub):
                    raise ValuesError(f"values.yaml:{sub[k].number}: unexpected indentation")
                items.append(value)
                i = j
            else:
                items.append(flow(rest, f"values.yaml:{line.number}"))
                i += 1
        return items, [], i
    value, nodes = {}, []
    while i < len(lines) and lines[i].indent == indent:
        line = lines[i]
        where = f"values.yaml:{line.number}"
        m = re.match(r"^(\"[^\"]*\"|'[^']*'|[^\s\"'{\[#][^:]*?):(?: (.*))?$", line.text)
        if not m:
            raise ValuesError(f"{where}: not a `key: value` line: {line.text!r}")
        key = scalar(m.group(1), where) if m.group(1)[0] in "\"'" else m.group(1)
        rest = (m.group(2) or "").strip()
        if key in value:
            raise ValuesError(f"{where}: {key} twice")
        if rest:
            if rest[0] in "|>&*!":
                raise ValuesError(f"{where}: block scalars, anchors and tags are not read here")
            value[key] = flow(rest, where)
            nodes.append(Node(path + [key], value[key], line.doc, line.number))
            i += 1
            continue
        i += 1
        if i < len(lines) and (lines[i].indent > indent or (
                lines[i].indent == indent and lines[i].text.startswith("- "))):
            child_indent = lines[i].indent
            child, children, i = parse_block(lines, i, child_indent, path + [key])
        else:
            child, children = None, []
        value[key] = child
        nodes.append(Node(path + [key], child, line.doc, line.number, children))
    if i < len(lines) and lines[i].indent > indent:
        raise ValuesError(f"values.yaml:{lines[i].number}: unexpected indentation")
    return value, nodes, i


def read_values(path):
    lines = lines_of(path)
    value, nodes, i = parse_block(lines, 0, 0, [])
    if i != len(lines):
        raise ValuesError(f"values.yaml:{lines[i].number}: unexpected indentation")
    return value, nodes


# --- the table -------------------------------------------------------------------------------

def type_of(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


def rows(nodes, problems):
    """(key, type, default, description) for each described key, in the file's order."""
    out = []
    for node in nodes:
        key = ".".join(node.path)
        if node.doc:
            text = " ".join(part for part in node.doc if part)
            kind = type_of(node.value)
            m = re.match(r"^\(([^)]+)\)\s*(.*)$", text)
            if m:
                kind, text = m.group(1), m.group(2)
            if not text:
                problems.append(f"values.yaml:{node.number}: {key}: an empty description")
            out.append((key, kind, node.value, text))
        elif node.children:
            out.extend(rows(node.children, problems))
        else:
            problems.append(f"values.yaml:{node.number}: {key} has no `# -- ` description "
                            "(nor has a map around it)")
    return out


def default_of(value):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "`" + text.replace("|", "\\|") + "`"


def cell(text):
    """A description as a table cell: `|` escaped, `*` too outside code spans (/debug/* is not
    emphasis), paths of the tree linked."""
    parts = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(parts), 2):  # outside code spans only
        parts[i] = parts[i].replace("*", "\\*")
        def link(m):
            path = m.group(1)
            if not os.path.exists(os.path.join(ROOT, path.split("#")[0])):
                return path
            return f"[{path}](../../{path})"
        parts[i] = re.sub(r"(?<![\w./-])((?:docs|deploy)/[\w./-]*\w(?:#[\w-]+)?)", link,
                          parts[i])
    return "".join(parts).replace("|", "\\|")


def chart_field(name):
    for line in open(os.path.join(HERE, "Chart.yaml"), encoding="utf-8"):
        m = re.match(rf"^{name}:\s*\"?([^\"#]*?)\"?\s*$", line)
        if m:
            return m.group(1)
    raise ValuesError(f"Chart.yaml: no {name}")


INTRO = """\
<!-- Generated by gen-readme.py from values.yaml: edit those, then run
     charts/taint-eviction-controller/gen-readme.py (ctest helm.readme fails while they differ). -->
# taint-eviction-controller chart

Version {version}, image {app_version}. The Helm chart of taint-eviction-controller: Kubernetes'
NoExecute taint manager as a Deployment of its own, with an optional eviction policy (rate
limits, a storm breaker, exclusions, per-taint rules), warnings at `kubectl taint`, and
metrics, alerts and a dashboard. With the default values it renders the same objects as
`deploy/` ([install.md](../../docs/install.md)).

## Install

There is no published image or chart repository yet: build the image, push it to your
registry, and install from a clone of the repository. Any namespace works.

```sh
kubectl create namespace taint-eviction-controller
kubectl label namespace taint-eviction-controller pod-security.kubernetes.io/enforce=restricted
helm install tec charts/taint-eviction-controller -n taint-eviction-controller \\
  --set image.repository=registry.example.com/taint-eviction-controller --set image.tag={app_version} \\
  --set shadow=true
```

`shadow=true` starts it in advisor mode, beside the built-in taint manager, deciding but
writing nothing, and comparing its decisions with the built-in's
([Advisor mode](../../docs/switching-over.md#advisor-mode)).
Then switch the built-in off and the shadow mode with it:
[switching-over.md](../../docs/switching-over.md). The release's notes say the same with your
release's names: `helm get notes tec -n taint-eviction-controller`.

With the Prometheus Operator, monitoring works at once when the chart knows who scrapes and
where the API server calls the webhook from:

```yaml
monitoring:
  serviceMonitor: {{enabled: true}}
  prometheusRule: {{enabled: true}}
  prometheus:
    serviceAccount: {{name: prometheus-k8s, namespace: monitoring}}
networkPolicy:
  controlPlane:
    cidrs: ["10.0.0.10/32", "10.0.0.11/32", "10.0.0.12/32"]  # your control plane nodes
```

## Values

`values.schema.json` refuses an unknown key and a value of the wrong type; the policy is
checked by the controller's own `--check-policy`, in a Job that `helm install` and
`helm upgrade` run first ([install.md](../../docs/install.md#the-policy-is-checked-before-it-is-installed)).

| Key | Type | Default | Description |
| --- | --- | --- | --- |
"""


def main():
    output = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "README.md")
    try:
        _, nodes = read_values(os.path.join(HERE, "values.yaml"))
        problems = []
        table = rows(nodes, problems)
        if problems:
            raise ValuesError("\n".join(problems))
        text = INTRO.format(version=chart_field("version"), app_version=chart_field("appVersion"))
    except ValuesError as e:
        print(f"gen-readme.py: {e}", file=sys.stderr)
        return 1
    for key, kind, value, description in table:
        text += f"| `{key}` | {kind} | {default_of(value)} | {cell(description)} |\n"
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
