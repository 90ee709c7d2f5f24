"""The documentation holds together: every relative link and image in README.md and
docs/**/*.md points at a file that exists, the README stays short, and the docs index
(docs/README.md) and the README link every docs page."""

import re
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
# the README is capped by what it says, not by how it is wrapped: words (tokens holding a letter
# or digit, so table rules and bullets do not count) and characters per line
README_MAX_WORDS = 1800
README_MAX_LINE = 120
ARCHITECTURE = DOCS / "architecture.md"

# [text](target) and ![alt](target), with an optional "title"; text may hold `code`
# and one level of nested brackets. <target> (angle brackets) allows spaces.
_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # [text] or ![alt]
    r"\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)  # (target "title")
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_SKIP = ("http://", "https://", "mailto:")


def _markdown_files() -> list[Path]:
    return [README] + sorted(DOCS.rglob("*.md"))


def _without_fenced_blocks(text: str) -> str:
    """``text`` with every fenced code block (``` or ~~~) blanked out, line by line."""
    kept, fence = [], None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif (
            fence is not None
            and m
            and m.group(1).startswith(fence)
            and not line.strip().lstrip(fence[0])
        ):
            fence = None
        elif fence is None:
            kept.append(line)
            continue
        kept.append("")
    return "\n".join(kept)


def _targets(text: str) -> list[str]:
    """The link and image targets of a Markdown text, outside code blocks and code spans."""
    # code spans end within their paragraph: a stray backtick hides nothing beyond it
    paragraphs = re.split(r"\n[ \t]*\n", _without_fenced_blocks(text))
    text = "\n\n".join(_CODE_SPAN.sub("", p) for p in paragraphs)
    out = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        out.append(target.strip())
    return out


def _relative_file(target: str) -> str | None:
    """The file part of a relative link, or None for external links and pure anchors."""
    if target.lower().startswith(_SKIP) or target.startswith("#"):
        return None
    path = target.split("#", 1)[0].split("?", 1)[0]
    return unquote(path) or None


def _broken_links(md: Path) -> list[str]:
    broken = []
    for target in _targets(md.read_text(encoding="utf-8")):
        path = _relative_file(target)
        if path is None:
            continue
        resolved = (REPO / path.lstrip("/")) if path.startswith("/") else (md.parent / path)
        if not resolved.exists():
            broken.append(target)
    return broken


def _linked_files(md: Path) -> set[Path]:
    files = set()
    for target in _targets(md.read_text(encoding="utf-8")):
        path = _relative_file(target)
        if path is not None:
            files.add((md.parent / path).resolve())
    return files


def _docs_pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if p.name != "README.md")


def test_link_parser_finds_links_and_images_and_skips_code():
    text = (
        'See [a](docs/a.md#x), ![img](pics/p.png "t") and [`code`](b.md).\n'
        "`[not](a link)` and\n```bash\n[nor](this.md)\n```\n[ext](https://x.org) <x>\n"
        "a stray ` backtick\n\n[after](c.md) [top](#anchor) [sp](<my file.md>)\n"
    )
    assert _targets(text) == [
        "docs/a.md#x",
        "pics/p.png",
        "b.md",
        "https://x.org",
        "c.md",
        "#anchor",
        "my file.md",
    ]
    assert [_relative_file(t) for t in _targets(text)] == [
        "docs/a.md",
        "pics/p.png",
        "b.md",
        None,
        "c.md",
        None,
        "my file.md",
    ]


def test_every_relative_link_in_readme_and_docs_resolves():
    broken = {md.relative_to(REPO).as_posix(): _broken_links(md) for md in _markdown_files()}
    broken = {name: links for name, links in broken.items() if links}
    message = "\n".join(f"{name}: {', '.join(links)}" for name, links in broken.items())
    assert not broken, "broken relative links (file: targets):\n" + message


def _words(text: str) -> int:
    return sum(any(c.isalnum() for c in token) for token in text.split())


def test_word_count_skips_markup():
    assert _words("| a | --- | **b** |\n* c, d.\n") == 4


def test_readme_is_at_most_1800_words():
    n = _words(README.read_text(encoding="utf-8"))
    assert n <= README_MAX_WORDS, (
        f"README.md has {n} words, more than {README_MAX_WORDS}; move the detail to docs/*.md"
    )


def test_readme_lines_are_at_most_120_characters():
    long = [
        f"line {i}: {len(line)}"
        for i, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > README_MAX_LINE
    ]
    assert not long, f"README.md lines over {README_MAX_LINE} characters: {', '.join(long)}"


def test_architecture_lists_every_module():
    """docs/architecture.md's module table names each module of nmt/ once, and no other."""
    listed = re.findall(
        r"^\| `(nmt/[\w/]+\.py)` \|", ARCHITECTURE.read_text(encoding="utf-8"), re.M
    )
    modules = sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "nmt").rglob("*.py")
        # a subpackage's __init__.py is its heading row, not a module row
        if p.name != "__init__.py" or p.parent == REPO / "nmt"
    )
    assert sorted(listed) == sorted(set(listed)), "docs/architecture.md names a module twice"
    missing, gone = sorted(set(modules) - set(listed)), sorted(set(listed) - set(modules))
    assert not missing and not gone, (
        f"docs/architecture.md's module table lacks {missing} "
        f"and names modules that do not exist: {gone}"
    )


def test_docs_index_links_every_docs_page():
    index = DOCS / "README.md"
    assert index.exists(), "docs/README.md (the docs index) is missing"
    linked = _linked_files(index)
    missing = [p.name for p in _docs_pages() if p.resolve() not in linked]
    assert not missing, f"docs/README.md does not link: {', '.join(missing)}"


def test_readme_links_the_docs_index_and_every_docs_page():
    linked = _linked_files(README)
    missing = [
        p.relative_to(REPO).as_posix()
        for p in [DOCS / "README.md"] + _docs_pages()
        if p.resolve() not in linked
    ]
    assert not missing, f"README.md does not link: {', '.join(missing)}"
