"""A normalised outline of an HTML page: tags, classes and ids only, no text.

Golden files compare outlines, so copy edits and number formatting do not churn them while
any change to the page structure does. Identical consecutive siblings collapse to ``×N``;
SVG charts are one node (their geometry depends on the data, tested elsewhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"meta", "br", "img", "input", "hr", "link", "col", "area", "base", "source", "wbr"}
_PREFIX = re.compile(r"^r\d+-")


@dataclass
class _Node:
    label: str
    children: list[_Node] = field(default_factory=list)


class _Outliner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("#document")
        self.stack = [self.root]
        self.svg_depth = 0

    def _label(self, tag: str, attrs: list[tuple[str, str | None]]) -> str:
        values = dict(attrs)
        label = tag
        if values.get("id"):
            label += "#" + _PREFIX.sub("", values["id"] or "")
        if values.get("class"):
            label += "." + ".".join(sorted((values["class"] or "").split()))
        if "open" in values:
            label += "[open]"
        return label

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.svg_depth:
            self.svg_depth += 1
            return
        node = _Node(self._label(tag, attrs))
        self.stack[-1].children.append(node)
        if tag == "svg":
            self.svg_depth = 1
            self.stack.append(node)
        elif tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self.svg_depth:
            self.stack[-1].children.append(_Node(self._label(tag, attrs)))

    def handle_endtag(self, tag: str) -> None:
        if self.svg_depth:
            self.svg_depth -= 1
            if self.svg_depth:
                return
        if tag in _VOID:
            return
        if len(self.stack) > 1:
            self.stack.pop()


def _signature(node: _Node) -> str:
    return node.label + "(" + ",".join(_signature(c) for c in node.children) + ")"


def _emit(node: _Node, depth: int, lines: list[str]) -> None:
    index = 0
    children = node.children
    while index < len(children):
        child = children[index]
        signature = _signature(child)
        run = 1
        while index + run < len(children) and _signature(children[index + run]) == signature:
            run += 1
        lines.append("  " * depth + child.label + (f" ×{run}" if run > 1 else ""))
        _emit(child, depth + 1, lines)
        index += run


def outline(html: str) -> str:
    parser = _Outliner()
    parser.feed(html)
    parser.close()
    lines: list[str] = []
    _emit(parser.root, 0, lines)
    return "\n".join(lines) + "\n"
