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
    from collections.abc import Callable


# The attributes of a tag: quote-aware (a ">" inside a quoted value does not end the tag), but
# an unquoted part stops at a "<" and a quoted value at its ninth "<", so an unclosed tag or
# quote costs at most the text up to the next few tags.
_ATTRS = r"""(?:[^<>"']++|"[^"<]*+(?:<[^"<]*+){0,8}+"|'[^'<]*+(?:<[^'<]*+){0,8}+')*+"""
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


def _scanner(link_tags: str) -> re.Pattern[str]:
    # lastindex tells the alternatives apart: 2 link tag, None a comment, bogus comment
    # (<!DOCTYPE, <![CDATA[, <?xml) or <plaintext> (the rest of the page is text), 4 script,
    # 5 other raw text, 6 title, 7 meta. Group 3 is the value of a first attribute written
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
        r")",
        re.I | re.S | re.A,
    )


_LINK, _TITLE, _META_TAG = 2, 6, 7  # the scanner's group (its lastindex) of each alternative
_SCAN = _scanner("a|area|link|frame|iframe|base")
_SCAN_IMAGES = _scanner("a|area|link|frame|iframe|base|img")


def _attr_matcher(name: str) -> Callable[[str], re.Match[str] | None]:
    # Skips whole attributes (names possessively, so no backtracking) until `name=`; the first
    # one wins, as in browsers. The value is group 1, 2 or 3 (double, single, unquoted), none
    # for an attribute without one (``name`` or ``name=`` at the end: empty, ``_value``).
    value = r"""\s*+=\s*+(?:"[^"]*+"|'[^']*+'|[^\s>]*+)"""
    return re.compile(
        rf"(?:[\s/]*+(?!{name}(?![^\s/>=]))[^\s/>=][^\s/>=]*+(?:{value})?)*+"
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
    r"""([^\s/>=][^\s/>=]*+)(?:\s*+=\s*+(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""", re.A
).finditer

_REL = _attr_matcher("rel")
