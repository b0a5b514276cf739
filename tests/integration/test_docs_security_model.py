"""docs/security-model.md cites a test for every claim, as `path::name`.

These checks keep the citations true to the tree: each cited file exists and
defines the cited test (a pytest function for .py files, a C function for
the unit tests and fuzz harnesses), and each link points at the file it
names. Fast, no root, no build needed.
"""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "security-model.md"

# path::name, where path is a test file under tests/
REF = re.compile(r"(tests/[A-Za-z0-9_./-]+\.(?:py|c))::([A-Za-z_][A-Za-z0-9_]*)")
# [text](target) links
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _doc():
    return DOC.read_text(encoding="utf-8")


def _refs():
    return sorted(set(REF.findall(_doc())))


def _python_tests(path):
    """Names pytest could collect from the file: test functions at any
    nesting (classes included) and module-level `test_x = ...` aliases."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if n.startswith("test")}


def _c_defines(path, name):
    """A function definition, not a prototype or a call: the name starts a
    line or follows a return type at the start of a line, and the line does
    not end in ';'."""
    text = path.read_text(encoding="utf-8", errors="replace")
    pat = re.compile(
        r"^(?:[A-Za-z_][A-Za-z0-9_ \t]*[ \t*]+)?\**" + re.escape(name) + r"\s*\([^;{]*(?:\{[^\n]*)?$",
        re.M)
    return any(not m.group(0).rstrip().endswith(";") for m in pat.finditer(text))


def test_doc_exists_and_cites_tests():
    assert DOC.is_file(), f"{DOC} is missing"
    refs = _refs()
    assert len(refs) >= 100, f"only {len(refs)} test references in {DOC.name}"


@pytest.mark.parametrize("path,name", _refs() if DOC.is_file() else [],
                         ids=lambda v: v)
def test_cited_test_exists(path, name):
    f = REPO / path
    assert f.is_file(), f"{DOC.name} cites {path}::{name}, but {path} does not exist"
    if f.suffix == ".py":
        assert name.startswith("test"), f"{path}::{name} is not a pytest test name"
        assert name in _python_tests(f), \
            f"{DOC.name} cites {path}::{name}, but {path} defines no test '{name}'"
    else:
        assert _c_defines(f, name), \
            f"{DOC.name} cites {path}::{name}, but {path} defines no function '{name}'"


def test_links_point_at_the_cited_file():
    """`[tests/x.py::test_y](../tests/x.py)`: the target is the same file, and
    every relative link on the page resolves."""
    doc = _doc()
    # GitHub's heading anchors: lowercase, punctuation dropped, spaces to '-'
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    bad = []
    for text, target in LINK.findall(doc):
        if target.startswith("#"):
            if target[1:] not in anchors:
                bad.append(f"{text} -> {target}: no such heading")
            continue
        if re.match(r"^[a-z]+:", target):
            continue
        rel = target.split("#", 1)[0]
        dest = (DOC.parent / rel).resolve()
        if not dest.exists():
            bad.append(f"{text} -> {target}: no such file")
            continue
        m = REF.fullmatch(text.strip("`"))
        if m and dest != (REPO / m.group(1)).resolve():
            bad.append(f"{text} -> {target}: points at another file")
    assert not bad, "broken links in docs/security-model.md:\n" + "\n".join(bad)


def test_every_unproven_claim_is_listed():
    """A claim marked **Unproven** in a table row appears in the list of
    claims without a test, by its id."""
    doc = _doc()
    head, sep, tail = doc.partition("## 5. Claims without a test")
    assert sep, "the 'Claims without a test' section is missing"
    listed = tail.split("\n## ", 1)[0]
    ids = re.findall(r"^\| ([A-Z]{1,2}\d+) \|.*\*\*[Uu]nproven\*\*", head, re.M)
    assert ids, "no claim is marked **Unproven**: update this check if that is true"
    missing = [i for i in ids if not re.search(rf"\b{i}\b", listed)]
    assert not missing, f"Unproven claims not in the list: {missing}"
