"""BRACS-like breast and CAMELYON17-like lymph-node slide case packs.

Slides are H&E-like pyramidal JPEG TIFFs (`slides.write_pyramid`) with the lesion drawn where its
polygon says. Breast lesions differ by class (ducts: normal two-layered; UDH streaming cells; FEA
dilated with columnar lining; ADH partially filled, rigid spaces; DCIS filled, central necrosis;
IC infiltrative nests without ducts; PB fibrous stroma with compressed ducts). Lymph-node metastases
are nests of large pale nuclei among dense lymphocytes, sized from the pixel size so that ITC
(< 0.2 mm), micro (0.2–2 mm) and macro (> 2 mm) follow the clinical definitions by largest diameter.
Ground truth: QuPath GeoJSON (level-0 px) and, for lymph nodes, the same polygons as ASAP XML.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from copilot.cases.annotations import Annotation, to_geojson
from copilot.cases.answers import BRACS_LABELS, BRACS_NAMES
from copilot.cases.pack import write_pack
from copilot.cases.slides import GLASS, HAEMATOXYLIN, he_image, nuclei_map, smooth_field, write_pyramid

METASTASIS_MM = {"itc": (0.08, 0.16), "micro": (0.5, 1.6), "macro": (2.2, 2.6)}


def _polygon(centre: tuple[float, float], radius: float, rng: np.random.Generator, n: int = 24) -> np.ndarray:
    """An irregular closed polygon (level-0 px) around a centre; largest diameter ≈ 2·radius."""
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = radius * rng.uniform(0.8, 1.0, n)
    radii[np.argmax(radii)] = radius
    return np.stack([centre[0] + radii * np.cos(angles), centre[1] + radii * np.sin(angles)], axis=1)


def _fill(shape: tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    img = Image.new("L", (shape[1], shape[0]), 0)
    ImageDraw.Draw(img).polygon([tuple(p) for p in polygon], fill=1)
    return np.asarray(img, dtype=bool)


def _ducts(
    shape: tuple[int, int], region: np.ndarray, rng: np.random.Generator, radius: float, count: int
) -> list[tuple[int, int, float]]:
    ys, xs = np.nonzero(region)
    if len(ys) == 0:
        return []
    pick = rng.integers(0, len(ys), count)
    return [(int(xs[p]), int(ys[p]), radius * rng.uniform(0.7, 1.3)) for p in pick]


def _paint_ducts(rgb: np.ndarray, ducts: list[tuple[int, int, float]], kind: str, rng: np.random.Generator) -> None:
    """Draw ducts with a class-specific lining/lumen; modifies `rgb` in place."""
    h, w = rgb.shape[:2]
    for x, y, r in ducts:
        y0, y1, x0, x1 = max(0, int(y - r - 2)), min(h, int(y + r + 2)), max(0, int(x - r - 2)), min(w, int(x + r + 2))
        yy, xx = np.mgrid[y0:y1, x0:x1]
        d = np.sqrt((yy - y) ** 2 + (xx - x) ** 2) / r
        patch = rgb[y0:y1, x0:x1].astype(np.float32)
        lining = (d > 0.78) & (d <= 1.0)
        lumen = d <= 0.78
        dots = rng.random(d.shape)
        fill = {"normal": 0.0, "UDH": 0.45, "FEA": 0.0, "ADH": 0.7, "DCIS": 1.0}[kind]
        layer = 0.6 if kind == "FEA" else 0.78
        lining = (d > layer) & (d <= 1.0)
        lumen = d <= layer
        patch[lining] = HAEMATOXYLIN * 0.8 + 40
        cells = lumen & (dots < fill)
        if kind == "ADH":
            cells &= ~((np.sin(xx / 6.0) + np.sin(yy / 6.0)) > 1.3)  # rigid punched-out spaces
        patch[lumen & ~cells] = GLASS
        patch[cells] = np.where(rng.random((int(cells.sum()), 1)) < 0.35, HAEMATOXYLIN, (200, 120, 175))
        if kind == "DCIS":
            patch[d < 0.3] = (236, 170, 200)  # comedo necrosis
        rgb[y0:y1, x0:x1] = np.clip(patch, 0, 255).astype(np.uint8)


def _base_tissue(shape: tuple[int, int], rng: np.random.Generator, density: float) -> tuple[np.ndarray, np.ndarray]:
    tissue = smooth_field(shape, rng, min(shape) / 3) > 0.35
    tissue = ndimage.binary_opening(tissue, iterations=3)
    soft = np.clip(ndimage.gaussian_filter(tissue.astype(np.float32), 3), 0, 1)
    return he_image(soft, nuclei_map(shape, rng, density, 3.5), rng), tissue


def _write_case(
    case: Path, module: str, rgb: np.ndarray, mpp: float, anns: list[Annotation], truth: dict, prompt: dict
) -> Path:
    write_pyramid(case / "images" / "slide.tif", rgb, mpp=mpp, downsamples=(1, 4, 16))
    write_pack(case, module, {"slide": "images/slide.tif", "image_type": "BRIGHTFIELD_H_E"}, prompt, truth)
    (case / "hidden" / "annotations.geojson").write_text(json.dumps(to_geojson(anns)), encoding="utf-8")
    return case


def make_breast_case(
    out_dir: Path,
    case_id: str,
    seed: int,
    size: tuple[int, int] = (4096, 3072),
    mpp: float = 0.5,
    label: str | None = None,
) -> Path:
    rng = np.random.default_rng(seed)
    label = label or BRACS_LABELS[seed % len(BRACS_LABELS)]
    shape = (size[1], size[0])
    rgb, tissue = _base_tissue(shape, rng, 1.5)
    ys, xs = np.nonzero(ndimage.binary_erosion(tissue, iterations=min(shape) // 10))
    ys, xs = (ys, xs) if len(ys) else np.nonzero(tissue)
    normal_region = tissue.copy()
    anns: list[Annotation] = []
    if label != "N":
        p = rng.integers(len(ys))
        poly = _polygon((float(xs[p]), float(ys[p])), min(shape) * rng.uniform(0.12, 0.18), rng)
        region = _fill(shape, poly) & tissue
        normal_region &= ~region
        anns.append(Annotation(label, poly))
        radius = 45.0 / mpp * 0.5
        if label == "IC":
            nests = nuclei_map(shape, rng, 25.0, 5.0) * region
            rgb[nests > 0.3] = (np.asarray(HAEMATOXYLIN) * 0.9).astype(np.uint8)
        elif label == "PB":
            rgb[region] = (rgb[region] * 0.7 + np.array([240, 170, 200]) * 0.3).astype(np.uint8)
            _paint_ducts(rgb, _ducts(shape, region, rng, radius * 0.6, 25), "normal", rng)
        else:
            kind = {"UDH": "UDH", "FEA": "FEA", "ADH": "ADH", "DCIS": "DCIS"}[label]
            scale = 1.8 if label in ("FEA", "DCIS") else 1.3
            _paint_ducts(rgb, _ducts(shape, region, rng, radius * scale, 18), kind, rng)
    _paint_ducts(rgb, _ducts(shape, normal_region, rng, 45.0 / mpp * 0.4, 30), "normal", rng)
    truth = {"label": label, "name": BRACS_NAMES[label], "seed": seed, "mpp": mpp}
    prompt = {"template": "breast_wsi", "case_alias": f"BRACS-SYN-{seed:05d}"}
    return _write_case(out_dir / case_id, "breast_wsi", rgb, mpp, anns, truth, prompt)


def make_lymph_case(
    out_dir: Path,
    case_id: str,
    seed: int,
    size: tuple[int, int] = (4096, 3072),
    mpp: float = 1.0,
    largest: str | None = None,
) -> Path:
    rng = np.random.default_rng(seed)
    largest = largest or ("negative", "itc", "micro", "macro")[seed % 4]
    shape = (size[1], size[0])
    # a lymph node: an oval of dense lymphocytes with a capsule, on glass
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]]
    node = ((xx - shape[1] / 2) / (shape[1] * 0.46)) ** 2 + ((yy - shape[0] / 2) / (shape[0] * 0.44)) ** 2 <= 1
    soft = np.clip(ndimage.gaussian_filter(node.astype(np.float32), 4), 0, 1)
    rgb = he_image(soft, nuclei_map(shape, rng, 40.0, 2.6) * node, rng)
    anns: list[Annotation] = []
    diameters: list[float] = []
    if largest != "negative":
        sizes = [largest] + (["itc"] if largest != "itc" and seed % 2 else [])
        inner = ndimage.binary_erosion(node, iterations=int(min(shape) * 0.05))
        for kind in sizes:
            diam_px = rng.uniform(*METASTASIS_MM[kind]) * 1000.0 / mpp
            margin = ndimage.binary_erosion(inner, iterations=int(diam_px / 2) + 4)
            ys, xs = np.nonzero(margin if margin.any() else inner)
            p = rng.integers(len(ys))
            poly = _polygon((float(xs[p]), float(ys[p])), diam_px / 2.0, rng)
            region = _fill(shape, poly)
            ry, rx = np.nonzero(region)
            box = (slice(ry.min(), ry.max() + 1), slice(rx.min(), rx.max() + 1))
            sub = region[box]
            tumour = he_image(sub.astype(np.float32), nuclei_map(sub.shape, rng, 9.0, 5.5) * sub, rng)
            rgb[box][sub] = (tumour[sub] * 0.8 + np.array([215, 150, 200]) * 0.2).astype(np.uint8)
            anns.append(Annotation("Tumor", poly))
            diameters.append(_max_diameter(poly) * mpp / 1000.0)
    # an exclusion region (a fold) in tumour-free tissue, as CAMELYON annotators mark artefacts
    ex = _polygon((shape[1] * 0.2, shape[0] * 0.5), min(shape) * 0.05, rng)
    if not any(_fill(shape, a.exterior)[_fill(shape, ex)].any() for a in anns):
        region = _fill(shape, ex) & node
        rgb[region] = (rgb[region] * 0.6).astype(np.uint8)
        anns.append(Annotation("Exclusion", ex))
    truth = {
        "tumor_presence": "no_tumor" if largest == "negative" else "tumor_present",
        "largest_metastasis": largest,
        "metastasis_diameters_mm": [round(d, 4) for d in diameters],
        "seed": seed,
        "mpp": mpp,
    }
    prompt = {"template": "lymph_node_wsi", "case_alias": f"C17-SYN-{seed:05d}"}
    case = _write_case(out_dir / case_id, "lymph_node_wsi", rgb, mpp, anns, truth, prompt)
    write_asap_xml(case / "hidden" / "annotations.xml", anns)
    return case


def _max_diameter(poly: np.ndarray) -> float:
    d = poly[:, None, :] - poly[None, :, :]
    return float(np.sqrt((d**2).sum(-1)).max())


def write_asap_xml(path: Path, anns: list[Annotation]) -> None:
    """CAMELYON/ASAP XML: Annotations (PartOfGroup = class) with ordered Coordinates in level-0 px."""
    root = ET.Element("ASAP_Annotations")
    group = ET.SubElement(root, "Annotations")
    for n, ann in enumerate(anns):
        el = ET.SubElement(
            group,
            "Annotation",
            Name=f"Annotation {n}",
            Type="Polygon",
            PartOfGroup="_2" if ann.cls == "Exclusion" else "_0",
            Color="#F4FA58",
        )
        coords = ET.SubElement(el, "Coordinates")
        for order, (x, y) in enumerate(ann.exterior):
            ET.SubElement(coords, "Coordinate", Order=str(order), X=f"{x:.2f}", Y=f"{y:.2f}")
    groups = ET.SubElement(root, "AnnotationGroups")
    for name in ("_0", "_2"):
        ET.SubElement(groups, "Group", Name=name, PartOfGroup="None", Color="#64FE2E")
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def read_asap_xml(path: Path) -> list[Annotation]:
    """Polygons of an ASAP XML; CAMELYON groups _0/_1 are tumour, _2 is exclusion."""
    out = []
    for ann in ET.parse(path).getroot().iter("Annotation"):
        pts = sorted(ann.iter("Coordinate"), key=lambda c: int(c.get("Order", "0")))
        poly = np.array([[float(c.get("X", "nan")), float(c.get("Y", "nan"))] for c in pts])
        group = ann.get("PartOfGroup", "")
        cls = "Exclusion" if group in ("_2", "Exclusion") else "Tumor"
        if len(poly) >= 3:
            out.append(Annotation(cls, poly))
    return out
