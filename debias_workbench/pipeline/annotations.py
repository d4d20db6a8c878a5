"""Pascal-VOC (ImageNet-style) bounding-box XML: reading, validating and writing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from debias_workbench.core.errors import SkipItem

from .imageio import Geometry

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, x1/y1 exclusive


def read_voc_boxes(xml_path: Path, width: int, height: int, geometry: Geometry | None = None) -> list[Box]:
    """Return the object boxes of `xml_path` clipped to a `width` x `height` image.

    When the XML's <size> differs from the decoded image, the image is taken as made from the
    photo: a square image under a crop `geometry` (as Xiao et al.'s released IN-9 images) is the
    square the geometry cuts from it (its `window`), any other a resized copy (each axis scaled:
    squashed, under `squash`); the boxes are mapped through that. A box that lies wholly outside the image
    is dropped; if none is left, or the XML is malformed, the item is skipped with the reason.
    """
    try:
        root = ET.parse(xml_path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise SkipItem(
            f"malformed annotation {xml_path} ({exc}); fix or delete it (then the fallback box is used)"
        ) from exc
    ox, oy, sx, sy = _photo_to_image(root, width, height, xml_path, geometry)
    boxes: list[Box] = []
    for obj in root.iter("object"):
        bnd = obj.find("bndbox")
        if bnd is None:
            raise SkipItem(f"malformed annotation {xml_path}: <object> without <bndbox>; fix or delete it")
        try:
            x0, y0, x1, y1 = (float(bnd.findtext(tag, "")) for tag in ("xmin", "ymin", "xmax", "ymax"))
        except ValueError as exc:
            raise SkipItem(f"malformed annotation {xml_path}: non-numeric box coordinate; fix or delete it") from exc
        if x1 < x0 or y1 < y0:
            raise SkipItem(f"malformed annotation {xml_path}: box with xmax<xmin or ymax<ymin; fix or delete it")
        # VOC coordinates are inclusive pixel indices: xmax is the last covered column.
        box = (
            max(0, int(round((x0 - ox) * sx))),
            max(0, int(round((y0 - oy) * sy))),
            min(width, int(round((x1 + 1 - ox) * sx))),
            min(height, int(round((y1 + 1 - oy) * sy))),
        )
        if box[2] > box[0] and box[3] > box[1]:
            boxes.append(box)
    if not boxes:
        raise SkipItem(
            f"annotation {xml_path} has no bounding box inside the {width}x{height} image; "
            "fix the boxes or delete the XML (then the fallback box is used)"
        )
    return boxes


def _photo_to_image(
    root: ET.Element, width: int, height: int, xml_path: Path, geometry: Geometry | None
) -> tuple[float, float, float, float]:
    """(ox, oy, sx, sy): a photo pixel (x, y) of the XML is image pixel ((x - ox) sx, (y - oy) sy)."""
    size = root.find("size")
    if size is None:
        return 0.0, 0.0, 1.0, 1.0
    try:
        w, h = int(size.findtext("width", "0")), int(size.findtext("height", "0"))
    except ValueError as exc:
        raise SkipItem(f"malformed annotation {xml_path}: non-numeric <size>; fix or delete it") from exc
    if w <= 0 or h <= 0:
        return 0.0, 0.0, 1.0, 1.0
    # a square image of another size cut from its photo (`geometry` crop), else a resized copy
    cut = width == height and (w, h) != (width, height)
    window = geometry.window(h, w) if geometry is not None and cut else None
    if window is None:
        return 0.0, 0.0, width / w, height / h
    top, left, side = window
    return float(left), float(top), width / side, height / side


def write_voc_xml(path: Path, filename: str, width: int, height: int, name: str, boxes: list[Box]) -> None:
    """Write boxes (x1/y1 exclusive) as a VOC/ImageNet annotation (inclusive coordinates)."""
    root = ET.Element("annotation")
    ET.SubElement(root, "filename").text = filename
    size = ET.SubElement(root, "size")
    for tag, val in (("width", width), ("height", height), ("depth", 3)):
        ET.SubElement(size, tag).text = str(val)
    for x0, y0, x1, y1 in boxes:
        obj = ET.SubElement(root, "object")
        ET.SubElement(obj, "name").text = name
        bnd = ET.SubElement(obj, "bndbox")
        for tag, val in (("xmin", x0), ("ymin", y0), ("xmax", x1 - 1), ("ymax", y1 - 1)):
            ET.SubElement(bnd, tag).text = str(val)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path)
