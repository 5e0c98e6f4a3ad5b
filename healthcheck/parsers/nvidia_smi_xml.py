"""``nvidia-smi -q -x`` XML -> a tree of :class:`Node` per GPU (:mod:`nvidia_smi_tree`; facts are read in :mod:`nvidia_smi`).

Handles every DTD version seen in the wild (``nvsmi_device_v9.dtd`` .. ``v12``): the element names
differ between versions (``clocks_throttle_reasons`` vs ``clocks_event_reasons``, ``power_readings``
vs ``gpu_power_readings``, ``single_bit``/``double_bit`` vs SRAM/DRAM ECC counters, ...) but the
document is always ``<nvidia_smi_log>`` with header elements and one ``<gpu id="...">`` per GPU.
Leading shell prompts and trailing text after ``</nvidia_smi_log>`` are cut off by the caller/here.

Safety: the only declaration accepted is the standard ``<!DOCTYPE nvidia_smi_log SYSTEM
"nvsmi_device_vNN.dtd">`` line (expat never fetches it). Any ``<!ENTITY`` or other DOCTYPE (an internal
subset could define entities: "billion laughs") is refused before parsing, and so is a document
with more than MAX_TAGS ``<`` (every element, comment or declaration costs one; a real 8-GPU document
has ~2,500): the element tree then stays a small multiple of the input. Nesting deeper than
``_MAX_DEPTH`` inside a ``<gpu>`` is a ParseError.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from healthcheck.parsers import ParseError
from healthcheck.parsers.nvidia_smi_tree import Node, RawGpu, norm_key

_STANDARD_DOCTYPE = re.compile(
    r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"nvsmi_device(?:_v\d+)?\.dtd"\s*>', re.IGNORECASE)
_DOCTYPE = re.compile(r"<!DOCTYPE", re.IGNORECASE)
_ENTITY = re.compile(r"<!ENTITY", re.IGNORECASE)
_END = "</nvidia_smi_log>"
_MAX_DEPTH = 32  # real documents nest 6 deep
MAX_TAGS = 100_000


def _check_declarations(text: str) -> None:
    if _ENTITY.search(text):
        raise ParseError("refusing nvidia-smi XML with an <!ENTITY declaration (entity expansion)")
    for match in _DOCTYPE.finditer(text):
        if not _STANDARD_DOCTYPE.match(text, match.start()):
            raise ParseError("refusing nvidia-smi XML with a non-standard DOCTYPE "
                             "(only <!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_vNN.dtd\">)")


def _to_node(element: ET.Element, depth: int = 0) -> Node:
    """Element -> Node: tag normalised, attributes as leaf children, text only for leaves."""
    if depth > _MAX_DEPTH:
        raise ParseError("nvidia-smi XML nested too deeply")
    children = [Node(norm_key(k), v) for k, v in element.attrib.items()]
    children += [_to_node(child, depth + 1) for child in element]
    value = None if len(element) else (element.text or "").strip()
    return Node(norm_key(element.tag), value, children)


def parse_xml_tree(text: str) -> tuple[Node, list[RawGpu]]:
    """Parse the XML document starting at ``text`` into (header node, GPUs in document order).

    Raises :class:`ParseError` for refused declarations and malformed or truncated XML.
    """
    tags = text.count("<")
    if tags > MAX_TAGS:
        raise ParseError(f"nvidia-smi XML: {tags} tags, over the limit of {MAX_TAGS} (not nvidia-smi output)")
    _check_declarations(text)
    end = text.rfind(_END)
    body = text[: end + len(_END)] if end >= 0 else text
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        hint = "" if end >= 0 else f" (no {_END}: output truncated?)"
        raise ParseError(f"malformed or truncated nvidia-smi XML: {exc}{hint}") from None
    except ValueError as exc:  # e.g. lone surrogates that cannot be encoded for expat
        raise ParseError(f"malformed nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"not nvidia-smi XML: root element is <{root.tag}>, not <nvidia_smi_log>")
    header = Node("header")
    gpus: list[RawGpu] = []
    for element in root:
        if element.tag == "gpu":
            tree = _to_node(element)
            gpus.append(RawGpu(element.get("id") or None, tree))
        elif len(element) == 0:
            header.children.append(Node(norm_key(element.tag), (element.text or "").strip()))
    return header, gpus
