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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator


# The attributes of a tag, as the tokenizer reads them: names (the first character may be "=" or
# a quote, as in "<a =x=1>"), each with an optional value, quoted only when a quote is the
# first character after "=" (so "href=/a'b" keeps its quote), and a ">" inside a quoted value
# does not end the tag. An unquoted part stops at a "<" and a quoted value at its ninth "<",
# so an unclosed tag or quote costs at most the text up to the next few tags; a quoted value
# that never closes ends the attributes before its name.
_QUOTED = r"""(?:"[^"<]*+(?:<[^"<]*+){0,8}+"|'[^'<]*+(?:<[^'<]*+){0,8}+')"""
_ATTRS = (rf"""(?:[\s/]++|[^\s/<>][^\s/<>=]*+(?:\s*+=\s*+(?:{_QUOTED}|[^\s<>"'][^\s<>]*+"""
          r"""|(?=[<>]|\Z)))?+(?!\s*+=))*+""")
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


def _scanner(link_tags: str, *, foreign: bool = False) -> re.Pattern[str]:
    # lastindex tells the alternatives apart: 2 link tag, None a comment, bogus comment
    # (<!DOCTYPE, <![CDATA[, <?xml) or <plaintext> (the rest of the page is text), 4 script,
    # 5 other raw text, 6 title, 7 meta, 8 (``foreign``: pages with "<svg" or "<math") an
    # <svg> or <math> start tag. Group 3 is the value of a first attribute written
    # href="...", the common shape, so most links need no second match over the tag's
    # attributes (the same value: nothing but an attribute's name and "=" come before it, and
    # a value with a "<" takes the general path). The lookahead turns away at once a "<" that
    # cannot start one of the alternatives ("</p", "<div", ...), about half of a page's "<".
    names = ("!", "?", "script", *_RAW_TEXT.split("|"), "plaintext", *link_tags.split("|"),
             "title", "meta")
    first = "".join(sorted({name[0] for name in names}))
    return re.compile(
        rf"<(?=[{first}])(?:"  # the link tags first: the most frequent "<" of a page
        rf"""({link_tags}){_END}((?:\s++href\s*+=\s*+"([^"<]*+)")?+{_ATTRS})"""
        r"|!--(?:-?>|.*?--!?>|.*)"  # comment: "<!-->", "<!--->", "-->" or "--!>" end it
        r"|[!?][^>]*+>?"  # bogus comment: up to the first ">"
        rf"|(script){_END}{_ATTRS}>?{_SCRIPT}"
        rf"|({_RAW_TEXT}){_END}{_ATTRS}>?[^<]*+(?:<(?!/\5{_T})[^<]*+)*+"
        rf"|plaintext{_END}.*+"
        rf"|title{_END}{_ATTRS}>?([^<]*+(?:<(?!/title{_T})[^<]*+)*+)"
        rf"|meta{_END}({_ATTRS})"
        + (rf"|((?:svg|math){_END}{_ATTRS})" if foreign else "")
        + r")",
        re.I | re.S | re.A,
    )


# Foreign content (inside <svg> or <math>): no raw text or RCDATA elements (an SVG <title> or
# <style> holds tags), CDATA sections are text, and the HTML tags the spec lists end it.
_BREAKOUT = ("b|big|blockquote|body|br|center|code|dd|div|dl|dt|em|embed|h[1-6]|head|hr|i|img|"
             "li|listing|menu|meta|nobr|ol|p|pre|ruby|s|small|span|strong|strike|sub|sup|table|"
             "tt|u|ul|var")


def _foreign_scanner(link_tags: str) -> re.Pattern[str]:
    # lastindex: 2 link tag (groups 1-3 as in ``_scanner``; <img> is left to HTML: it ends
    # foreign content), 4 an HTML tag that ends foreign content (its "<" is read again as
    # HTML), 5 a nested <svg>/<math> start tag, 6 a <title>'s text (read ahead, for a page
    # without an HTML title; its tags are still scanned), 7 an </svg> or </math> end tag,
    # None comments and CDATA.
    return re.compile(
        rf"""<(?:({link_tags}){_END}((?:\s++href\s*+=\s*+"([^"<]*+)")?+{_ATTRS})"""
        rf"|(?=(?:{_BREAKOUT}){_END}|/(?:br|p){_END})()"
        r"|!--(?:-?>|.*?--!?>|.*)"
        r"|!\[CDATA\[.*?(?:\]\]>|\Z)"
        r"|[!?][^>]*+>?"
        rf"|((?:svg|math){_END}{_ATTRS})"
        rf"|title{_END}{_ATTRS}>?(?=([^<]*+(?:<(?!/title{_T})[^<]*+)*+))"
        rf"|/(?:svg|math){_END}[^>]*+>?()"
        r")",
        re.I | re.S | re.A,
    )


_LINK, _TITLE, _META_TAG = 2, 6, 7  # the scanner's group (its lastindex) of each alternative
_FOREIGN_START = 8  # the scanner's group of an <svg>/<math> start tag (foreign=True)
_F_BREAKOUT, _F_START, _F_END = 4, 5, 7  # the foreign scanner's (its _LINK and _TITLE too)
_HAS_FOREIGN = re.compile(r"<(?:svg|math)", re.I | re.A).search


def _foreign(text: str, scan: re.Pattern[str], pos: int
             ) -> Generator[re.Match[str], None, int]:
    """The link matches of the foreign content from ``pos``; returns where HTML resumes."""
    depth = 1
    for m in scan.finditer(text, pos):
        kind = m.lastindex
        if kind in (_LINK, _TITLE):
            yield m
        elif kind == _F_START and not m.group(_F_START).endswith("/"):
            depth += 1
        elif kind == _F_END:
            depth -= 1
            if depth == 0:
                return m.end()
        elif kind == _F_BREAKOUT:
            return m.start()
    return len(text)


def _mixed(text: str, html: re.Pattern[str], foreign: re.Pattern[str]
           ) -> Iterator[re.Match[str]]:
    """Matches of a page with foreign content: HTML's, and the foreign scanner's link
    matches (the same groups) inside <svg> and <math>."""
    pos = 0
    while True:
        for m in html.finditer(text, pos):
            if m.lastindex != _FOREIGN_START:
                yield m
            elif not m.group(_FOREIGN_START).endswith("/"):  # <svg/> holds nothing
                pos = yield from _foreign(text, foreign, m.end())
                break
        else:
            return


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
_SCAN = _scanner(_TAGS)
_SCAN_IMAGES = _scanner(_TAGS + "|img")
_SCAN_MIXED = _scanner(_TAGS, foreign=True)
_SCAN_MIXED_IMAGES = _scanner(_TAGS + "|img", foreign=True)
_SCAN_FOREIGN = _foreign_scanner("a")  # an SVG (or MathML) <a href>; <link>... are not HTML's


def scan(text: str, images: bool) -> Iterator[re.Match[str]]:
    """The scanner's matches over a page; a page with "<svg" or "<math" takes the slower
    path that reads foreign content as the spec does."""
    if _HAS_FOREIGN(text) is None:
        return (_SCAN_IMAGES if images else _SCAN).finditer(text)
    return _mixed(text, _SCAN_MIXED_IMAGES if images else _SCAN_MIXED, _SCAN_FOREIGN)
