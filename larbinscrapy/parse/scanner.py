"""The tag scanner of ``links.py``: the page read as the HTML spec's tokenizer reads it.

One compiled regular expression finds, at each ``<``, the tags that carry links (and title and
meta), and steps over what the tokenizer reads as text: comments (ended by ``-->``, ``--!>``,
or at once by ``<!-->`` and ``<!--->``), bogus comments (``<!DOCTYPE``, ``<![CDATA[`` outside
SVG and MathML, ``<?xml``, up to the first ``>``), raw text and RCDATA elements (``script``
with its escaped sections, ``style``, ``xmp``, ``noembed``, ``textarea``, ``title``) and
everything after ``<plaintext>``. Every pattern is possessive and stops at the next ``<`` (or
the end of a comment or a raw text element), so the scan stays linear on hostile input.
``<noscript>``, ``<noframes>`` and ``<iframe>`` content is read for links on purpose (a crawler
runs no scripts and shows no frames).

More in docs/modules.md (`larbinscrapy/parse/scanner.py`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


# The attributes of a tag, as the tokenizer reads them: a quote starts a quoted value only right
# after "=" (and spaces), so "href=/a'b" keeps its quote and '<a "x=1>' has a name '"x', and
# a ">" inside a quoted value does not end the tag. An unquoted part stops at a "<" and a
# quoted value at its ninth "<", so an unclosed tag or quote costs at most the text up to the
# next few tags; a quoted value that never closes ends the attributes at its "=".
_QUOTED = r"""(?:"[^"<]*+(?:<[^"<]*+){0,8}+"|'[^'<]*+(?:<[^'<]*+){0,8}+')"""
_ATTRS = rf"""(?:[^<>"'=]++|=\s*+{_QUOTED}|=(?!\s*+["'])|["'])*+"""
_END = r"(?=[\s/>])"


# Script data as the HTML tokenizer reads it: "<!--" starts an escaped section where
# "<script" starts a double-escaped one whose "</script" does not end the element; "-->" ends
# either. A "</script" outside a double-escaped section ends it.
_T = r"(?=[\s/>])"
_SCRIPT_DATA = rf"[^<]*+(?:<(?!/script{_T}|!--)[^<]*+)*+"
_ESCAPED = rf"(?:[^<-]++|-(?!->)|<(?!/?script{_T}))*+"
_DOUBLE = rf"(?:[^<-]++|-(?!->)|<(?!/script{_T}))*+"
_SCRIPT = (
    rf"{_SCRIPT_DATA}(?:<!--(?:-*+>|{_ESCAPED}(?:<script{_T}{_DOUBLE}</script{_T}{_ESCAPED})*+"
    rf"(?:<script{_T}{_DOUBLE})?+(?:-->)?+){_SCRIPT_DATA})*+"
)
# raw text and escapable raw text (RCDATA) elements: no tags inside, up to their end tag
_RAW_TEXT = "style|xmp|noembed|textarea"
_POINTS = "title|desc|foreignobject|mi|mo|mn|ms|mtext"  # HTML integration points (below)


def _scanner(link_tags: str, *, foreign: bool = False, cdata: bool = False) -> re.Pattern[str]:
    # lastindex tells the alternatives apart: 2 link tag, None a comment, bogus comment
    # (<!DOCTYPE, <![CDATA[, <?xml) or <plaintext> (the rest of the page is text), 4 script,
    # 5 other raw text, 6 title, 7 meta; with ``foreign`` (pages with "<svg" or "<math"), 8
    # an <svg> or <math> start tag, 9 the end tag of an HTML integration point or of <a>
    # (``cdata``: inside an integration point, where CDATA sections are text). Group 3 is
    # the value of a first attribute written href="...", the common shape, so most links
    # need no second match over the tag's attributes (the same value: nothing but an
    # attribute's name and "=" come before it, and a value with a "<" takes the general
    # path). The lookahead turns away at once a "<" that cannot start one of the
    # alternatives ("</p", "<div", ...), about half of a page's "<".
    names = (
        "!",
        "?",
        "script",
        *_RAW_TEXT.split("|"),
        "plaintext",
        *link_tags.split("|"),
        "title",
        "meta",
    )
    first = "".join(sorted({name[0] for name in names} | ({"/"} if foreign else set())))
    return re.compile(
        rf"<(?=[{first}])(?:"  # the link tags first: the most frequent "<" of a page
        rf"""({link_tags}){_END}((?:\s++href\s*+=\s*+"([^"<]*+)")?+{_ATTRS})"""
        r"|!--(?:-?>|.*?--!?>|.*)"  # comment: "<!-->", "<!--->", "-->" or "--!>" end it
        + (r"|!\[CDATA\[.*?(?:\]\]>|\Z)" if cdata else "")
        + r"|[!?][^>]*+>?"  # bogus comment: up to the first ">"
        rf"|(script){_END}{_ATTRS}>?{_SCRIPT}"
        rf"|({_RAW_TEXT}){_END}{_ATTRS}>?[^<]*+(?:<(?!/\5{_T})[^<]*+)*+"
        rf"|plaintext{_END}.*+"
        rf"|title{_END}{_ATTRS}>?([^<]*+(?:<(?!/title{_T})[^<]*+)*+)"
        rf"|meta{_END}({_ATTRS})"
        + (rf"|((?:svg|math){_END}{_ATTRS})|/({_POINTS}|a){_END}[^<>]*+>?" if foreign else "")
        + (rf"|/([a-z][^\s/>]*+){_END}[^<>]*+>?" if cdata else "")
        + r")",
        re.I | re.S | re.A,
    )


# Foreign content (inside <svg> or <math>): no raw text or RCDATA elements (an SVG <title> or
# <style> holds tags), CDATA sections are text, and the HTML start tags the spec lists end it
# (not the end tags </p> and </br>, which the spec added later: html5lib, our reference for
# tests, and older browsers ignore them there). A <font> with attributes is not one of them.
_BREAKOUT = (
    "b|big|blockquote|body|br|center|code|dd|div|dl|dt|em|embed|h[1-6]|head|hr|i|img|"
    "li|listing|menu|meta|nobr|ol|p|pre|ruby|s|small|span|strong|strike|sub|sup|table|"
    "tt|u|ul|var"
)


def _foreign_scanner(link_tags: str) -> re.Pattern[str]:
    # lastindex: 2 link tag (groups 1-3 as in ``_scanner``; <img> is left to HTML: it ends
    # foreign content), 4 an HTML tag that ends foreign content (its "<" is read again as
    # HTML), 5 a nested <svg>/<math> start tag, 6 a <title>'s text (read ahead, for a page
    # without an HTML title), 7 an </svg>, </math> or </a> end tag, 8 the start tag of another HTML
    # integration point; None comments and CDATA.
    return re.compile(
        rf"""<(?:({link_tags}){_END}((?:\s++href\s*+=\s*+"([^"<]*+)")?+{_ATTRS})"""
        rf"|(?=(?:{_BREAKOUT}){_END})()"
        r"|!--(?:-?>|.*?--!?>|.*)"
        r"|!\[CDATA\[.*?(?:\]\]>|\Z)"
        r"|[!?][^>]*+>?"
        rf"|((?:svg|math){_END}{_ATTRS})"
        rf"|title{_END}{_ATTRS}>?(?=([^<]*+(?:<(?!/title{_T})[^<]*+)*+))"
        rf"|/(?:svg|math|a){_END}[^>]*+>?()"
        rf"|((?:{_POINTS}){_END}{_ATTRS}>?)"
        rf"|([a-z][^\s/>]*+{_END}{_ATTRS}>?)"
        rf"|/([a-z][^\s/>]*+){_END}[^<>]*+>?"
        r")",
        re.I | re.S | re.A,
    )


_LINK, _TITLE, _META_TAG = 2, 6, 7  # the scanner's group (its lastindex) of each alternative
_FOREIGN_START, _POINT_END = 8, 9  # the mixed scanner's (foreign=True)
_F_BREAKOUT, _F_START, _F_END, _F_POINT = 4, 5, 7, 8  # the foreign scanner's (_LINK, _TITLE)
_F_OTHER, _F_OTHER_END = 9, 10  # any other foreign start or end tag (the foreign scanner's)
_END_TAG = 10  # any other end tag, inside an integration point (``cdata``)
# HTML integration points: their content is HTML (svg title, desc, foreignObject; MathML's
# text integration points)
_POINTS_OF = {"svg": ("title", "desc", "foreignobject"), "math": ("mi", "mo", "mn", "ms", "mtext")}


_POINT_KINDS = ("ip", "ip+")
_HAS_FOREIGN = re.compile(r"<(?:svg|math|SVG|MATH)").search  # one search; re.I: twice the time


def _closed(tag: str) -> bool:
    """Whether a start tag's text (from its name on) ends with "/>", the slash not part of
    an unquoted value ("<a href=/x/>" is open)."""
    rest = tag.rstrip(">")[len(_name(tag)) :]
    return _SELF_CLOSING(rest) is not None


_SELF_CLOSING = re.compile(r"(?:^|[\s/\"'])/\Z").search


class _Open:
    """What is open while a page with foreign content is read: ``stack`` of (name, kind),
    kind "svg" or "math" for a foreign element, "ip" for an HTML integration point ("ip+"
    once an HTML <a> is open in it: CDATA is then a bogus comment again); and whether an HTML
    <a> is open (an </a> in foreign content then closes all of it)."""

    __slots__ = ("a", "stack", "title")

    def __init__(self) -> None:
        self.stack: list[tuple[str, str]] = []
        self.a = False
        self.title = False  # an HTML <title> was read: the next </title> is its own

    def in_html(self) -> bool:
        return not self.stack or self.stack[-1][1] in _POINT_KINDS

    def close_below(self, name: str) -> bool:
        """An end tag in an integration point: close the nearest foreign element ``name``
        below it (the tree builder reads it as foreign content's end tag)."""
        stack, depth = self.stack, len(self.stack) - 1
        while depth and stack[depth - 1][1] not in _POINT_KINDS and stack[depth - 1][0] != name:
            depth -= 1
        if not depth or stack[depth - 1][1] in _POINT_KINDS:
            return False
        del stack[depth - 1 :]
        return True

    def close_to(self, name: str) -> bool:
        """Close the nearest foreign element ``name`` (not past an integration point)."""
        stack, depth = self.stack, len(self.stack)
        while depth and stack[depth - 1][1] not in _POINT_KINDS and stack[depth - 1][0] != name:
            depth -= 1
        if not depth or stack[depth - 1][1] in _POINT_KINDS:
            return False
        del stack[depth - 1 :]
        return True


def _mixed(
    text: str, html: re.Pattern[str], point: re.Pattern[str], foreign: re.Pattern[str]
) -> Iterator[re.Match[str]]:
    """Matches of a page with foreign content: the HTML scanner's (``point``'s inside an
    integration point), and the foreign scanner's link and title matches (the same groups)
    inside <svg> and <math>."""
    state = _Open()
    pos = 0
    while True:
        if state.in_html():
            cdata = bool(state.stack) and state.stack[-1][1] == "ip"
            scanner, step = (point if cdata else html), _html_step
        else:
            scanner, step = foreign, _foreign_step
        for m in scanner.finditer(text, pos):
            emit, switch = step(m, m.lastindex, state)
            if emit:
                yield m
            if switch is not None:
                pos = switch
                break
        else:
            return


def _html_step(m: re.Match[str], kind: int | None, state: _Open) -> tuple[bool, int | None]:
    """What the mixed HTML scanner's match ``m`` does: (yield it?, switch scanners there)."""
    if kind == _LINK:
        if m.group(1).lower() == "a":
            state.a = True
            if state.stack and state.stack[-1][1] == "ip":  # an HTML element in the point
                state.stack[-1] = (state.stack[-1][0], "ip+")
                return True, m.end()
        return True, None
    if kind == _TITLE:
        state.title = True
        return True, None
    if kind == _FOREIGN_START:
        tag = m.group(_FOREIGN_START)
        if _closed(tag):  # <svg/> holds nothing
            return False, None
        state.stack.append((_name(tag), _name(tag)))
        return False, m.end()
    if kind == _END_TAG:  # in the integration point itself: it may close foreign elements
        if state.close_below(m.group(_END_TAG).lower()):
            return False, m.end()
        return False, None
    if kind == _POINT_END:
        name = m.group(_POINT_END).lower()
        if name == "a":
            state.a = False
        elif name == "title" and state.title:
            state.title = False
        elif state.stack and state.stack[-1][0] == name and state.in_html():
            state.stack.pop()
            return False, m.end()
        return False, None
    return True, None


def _foreign_step(m: re.Match[str], kind: int | None, state: _Open) -> tuple[bool, int | None]:
    """What the foreign scanner's match ``m`` does (``_html_step``)."""
    stack = state.stack
    ns = stack[-1][1]
    if kind == _LINK:  # an SVG or MathML <a>
        if not _closed(m.group(0)[1:]):
            stack.append(("a", ns))
        return True, None
    if kind in (_TITLE, _F_POINT):
        name = _name(m.group(0)[1:])
        if name in _POINTS_OF[ns] and not _closed(m.group(0)[1:]):
            stack.append((name, "ip"))
            return kind == _TITLE, m.end()
        return kind == _TITLE, None
    if kind == _F_START:
        if not _closed(m.group(_F_START)):
            stack.append((_name(m.group(_F_START)), ns))  # <svg> in MathML is MathML's
        return False, None
    if kind == _F_END:
        name = _name(m.group(0)[2:])
        if state.close_to(name):
            return False, (m.end() if state.in_html() else None)
        if name == "a" and state.a and all(k not in _POINT_KINDS for _, k in stack):
            stack.clear()  # the HTML <a> around the foreign content is closed, and it
            state.a = False
            return False, m.end()
        return False, None
    if kind == _F_OTHER:
        if not _closed(m.group(_F_OTHER)):
            stack.append((_name(m.group(_F_OTHER)), ns))
        return False, None
    if kind == _F_OTHER_END:
        if state.close_to(m.group(_F_OTHER_END).lower()):
            return False, (m.end() if state.in_html() else None)
        return False, None
    if kind == _F_BREAKOUT:  # every foreign element up to an integration point is closed
        while stack and stack[-1][1] not in _POINT_KINDS:
            stack.pop()
        return False, m.start()
    return False, None


def _name(tag: str) -> str:
    """The lower-case name of a start tag's text (without its "<")."""
    return re.split(r"[\s/>]", tag, maxsplit=1)[0].lower()


def _attr_matcher(name: str) -> Callable[[str], re.Match[str] | None]:
    # Skips whole attributes (names possessively, so no backtracking) until `name=`; the first
    # one wins, as in browsers. The value is group 1, 2 or 3 (double, single, unquoted), none
    # for an attribute without one (``name`` or ``name=`` at the end: empty, ``_value``).
    value = r"""\s*+=\s*+(?:"[^"]*+"|'[^']*+'|[^\s>]*+)"""
    return re.compile(  # a skipped name may start with "=" (the tokenizer's reading)
        rf"(?:[\s/]*+(?!{name}(?![^\s/>=]))[^\s/>][^\s/>=]*+(?:{value})?)*+"
        rf"""[\s/]*+{name}(?:\s*+=\s*+(?:"([^"]*)"|'([^']*)'|([^\s>"'][^\s>]*)|\Z)"""
        r"|(?![^\s/>=])(?!\s*+=))",
        re.I | re.A,
    ).match


def _value(m: re.Match[str]) -> str:
    """The value an ``_attr_matcher`` match found ("" for an attribute without one)."""
    return m.group(m.lastindex) if m.lastindex else ""


_HREF = _attr_matcher("href")
_SRC = _attr_matcher("src")
_ATTR_OF_TAG = {
    "a": _HREF,
    "area": _HREF,
    "link": _HREF,
    "base": _HREF,
    "frame": _SRC,
    "iframe": _SRC,
    "img": _SRC,
}
_ANY_ATTR = re.compile(
    r"""([^\s/>][^\s/>=]*+)(?:\s*+=\s*+(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""", re.A
).finditer

_REL = _attr_matcher("rel")


_TAGS = "a|area|link|frame|iframe|base"
SCAN_HTML = _SCAN = _scanner(_TAGS)  # a page without foreign content (links.py, benchmarks)
SCAN_HTML_IMAGES = _SCAN_IMAGES = _scanner(_TAGS + "|img")
_SCAN_MIXED = _scanner(_TAGS, foreign=True)
_SCAN_MIXED_IMAGES = _scanner(_TAGS + "|img", foreign=True)
_SCAN_POINT = _scanner(_TAGS, foreign=True, cdata=True)
_SCAN_POINT_IMAGES = _scanner(_TAGS + "|img", foreign=True, cdata=True)
_SCAN_FOREIGN = _foreign_scanner("a")  # an SVG (or MathML) <a href>; <link>... are not HTML's


def scan(text: str, images: bool) -> Iterator[re.Match[str]]:
    """The scanner's matches over a page; a page with "<svg" or "<math" (lower or upper case:
    a mixed-case "<Svg" is rare, and a case-blind search takes twice as long on every page)
    takes the slower path that reads foreign content as the spec does."""
    if _HAS_FOREIGN(text) is None:
        return (_SCAN_IMAGES if images else _SCAN).finditer(text)
    if images:
        return _mixed(text, _SCAN_MIXED_IMAGES, _SCAN_POINT_IMAGES, _SCAN_FOREIGN)
    return _mixed(text, _SCAN_MIXED, _SCAN_POINT, _SCAN_FOREIGN)
