"""BRACS-like breast and CAMELYON17-like lymph-node slide case packs.

Slides are H&E-like pyramidal JPEG TIFFs painted tile by tile (`canvas`, `slides.write_pyramid_tiles`),
so memory stays a few tile rows at any slide size, with the lesion drawn where its polygon says.
Breast lesions differ by class (ducts: normal two-layered; UDH streaming cells; FEA dilated with columnar
lining; ADH partially filled, rigid spaces; DCIS filled, central necrosis; IC infiltrative nests without
ducts; PB fibrous stroma with compressed ducts). Lymph-node metastases
are nests of large pale nuclei among dense lymphocytes, sized from the pixel size so that ITC
(< 0.2 mm), micro (0.2–2 mm) and macro (> 2 mm) follow the clinical definitions by largest diameter.
Ground truth: QuPath GeoJSON (level-0 px) and, for lymph nodes, the same polygons as ASAP XML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np

from copilot.cases.annotations import Annotation, to_geojson
from copilot.cases.answers import BRACS_LABELS, BRACS_NAMES
from copilot.cases.canvas import Layout, SmoothField, block_rng, fill, noise, nuclei, soften, touches
from copilot.cases.pack import write_pack
from copilot.cases.progress import report
from copilot.cases.slides import GLASS, HAEMATOXYLIN, TileSource, he_stain, write_pyramid_tiles

METASTASIS_MM = {"itc": (0.08, 0.16), "micro": (0.5, 1.6), "macro": (2.2, 2.6)}
TISSUE = 0.35  # the smooth field's threshold for tissue on a breast slide
# texture purposes (keys of the per-block random generators)
NUCLEI, STAIN, DUCT, NESTS, TUMOUR_NUCLEI, TUMOUR_STAIN = 1, 2, 3, 4, 10, 20
DUCT_FILL = {"normal": 0.0, "UDH": 0.45, "FEA": 0.0, "ADH": 0.7, "DCIS": 1.0}


def _polygon(centre: tuple[float, float], radius: float, rng: np.random.Generator, n: int = 24) -> np.ndarray:
    """An irregular closed polygon (level-0 px) around a centre; largest diameter ≈ 2·radius."""
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = radius * rng.uniform(0.8, 1.0, n)
    radii[np.argmax(radii)] = radius
    return np.stack([centre[0] + radii * np.cos(angles), centre[1] + radii * np.sin(angles)], axis=1)


@dataclass(frozen=True)
class Duct:
    """A duct (level-0 px centre and radius) and its class-specific look."""

    x: float
    y: float
    r: float
    kind: str


def _ducts(
    layout: Layout, region: np.ndarray, rng: np.random.Generator, radius: float, count: int, kind: str
) -> list[Duct]:
    if not region.any():
        return []
    return [Duct(*layout.pick(region, rng), radius * rng.uniform(0.7, 1.3), kind) for _ in range(count)]


def _duct_look(duct: Duct, key: int, seed: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """A duct's box origin (x0, y0), the mask it paints and the colours there: lining, lumen, cells, necrosis."""
    x0, y0 = int(duct.x - duct.r - 2), int(duct.y - duct.r - 2)
    yy, xx = np.mgrid[y0 : int(duct.y + duct.r + 2), x0 : int(duct.x + duct.r + 2)]
    d = np.sqrt((yy - duct.y) ** 2 + (xx - duct.x) ** 2) / duct.r
    rng = block_rng(seed, DUCT, key, 0)
    layer = 0.6 if duct.kind == "FEA" else 0.78
    lining, lumen = (d > layer) & (d <= 1.0), d <= layer
    cells = lumen & (rng.random(d.shape) < DUCT_FILL[duct.kind])
    if duct.kind == "ADH":
        cells &= ~((np.sin(xx / 6.0) + np.sin(yy / 6.0)) > 1.3)  # rigid punched-out spaces
    colour = np.zeros((*d.shape, 3), np.float32)
    colour[lining] = HAEMATOXYLIN * 0.8 + 40
    colour[lumen & ~cells] = GLASS
    colour[cells] = np.where(rng.random((int(cells.sum()), 1)) < 0.35, HAEMATOXYLIN, (200, 120, 175))
    if duct.kind == "DCIS":
        colour[d < 0.3] = (236, 170, 200)  # comedo necrosis
    return x0, y0, d <= 1.0, np.clip(colour, 0, 255).astype(np.uint8)


def _paint_ducts(rgb: np.ndarray, y0: int, x0: int, ducts: list[Duct], seed: int) -> None:
    """Draw the parts of the ducts that fall in a tile at (y0, x0); modifies `rgb` in place."""
    h, w = rgb.shape[:2]
    for key, duct in enumerate(ducts):
        reach = duct.r + 2
        if duct.x + reach < x0 or duct.x - reach > x0 + w or duct.y + reach < y0 or duct.y - reach > y0 + h:
            continue
        bx, by, mask, colour = _duct_look(duct, key, seed)
        ya, yb = max(y0, by), min(y0 + h, by + mask.shape[0])
        xa, xb = max(x0, bx), min(x0 + w, bx + mask.shape[1])
        if ya >= yb or xa >= xb:
            continue
        m = mask[ya - by : yb - by, xa - bx : xb - bx]
        rgb[ya - y0 : yb - y0, xa - x0 : xb - x0][m] = colour[ya - by : yb - by, xa - bx : xb - bx][m]


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two polygons (level-0 px) share pixels, rasterised on their common box (≤ 1024 cells a side)."""
    lo, hi = np.maximum(a.min(0), b.min(0)), np.minimum(a.max(0), b.max(0))
    if (hi < lo).any():
        return False
    scale = max(1, int(np.ceil((hi - lo).max() / 1024)))
    x0, y0 = int(lo[0] // scale), int(lo[1] // scale)
    h, w = int(hi[1] // scale) - y0 + 2, int(hi[0] // scale) - x0 + 2
    return bool((fill(a, y0, x0, h, w, scale) & fill(b, y0, x0, h, w, scale)).any())


def _write_case(
    case: Path,
    module: str,
    shape: tuple[int, int],
    paint: TileSource,
    mpp: float,
    anns: list[Annotation],
    truth: dict,
    prompt: dict,
) -> Path:
    slide = case / "images" / "slide.tif"
    write_pyramid_tiles(slide, shape, paint, mpp, (1, 4, 16), progress=lambda f: report(f"{case.name} slide", f))
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
    """A BRACS-like breast slide of `size` (width, height) px, painted tile by tile, with its lesion polygon."""
    rng = np.random.default_rng(seed)
    label = label or BRACS_LABELS[seed % len(BRACS_LABELS)]
    shape = (size[1], size[0])
    layout = Layout(*shape)
    field = SmoothField.random(shape, rng, min(shape) / 3)
    tissue = field.window(0, 0, *layout.shape, scale=layout.scale) > TISSUE
    tissue = tissue if tissue.any() else np.ones_like(tissue)
    inner = layout.erode(tissue, min(shape) // 10)
    normal_region = tissue.copy()
    anns: list[Annotation] = []
    ducts: list[Duct] = []
    if label != "N":
        poly = _polygon(layout.pick(inner if inner.any() else tissue, rng), min(shape) * rng.uniform(0.12, 0.18), rng)
        region = layout.fill(poly) & tissue
        normal_region &= ~region
        anns.append(Annotation(label, poly))
        radius = 45.0 / mpp * 0.5
        if label == "PB":
            ducts += _ducts(layout, region, rng, radius * 0.6, 25, "normal")
        elif label != "IC":
            ducts += _ducts(layout, region, rng, radius * (1.8 if label in ("FEA", "DCIS") else 1.3), 18, label)
    ducts += _ducts(layout, normal_region, rng, 45.0 / mpp * 0.4, 30, "normal")
    lesion = anns[0].exterior if anns else None
    halo = 13  # the soft tissue edge (σ 3 px)

    def paint(y0: int, x0: int, h: int, w: int) -> np.ndarray:
        wide = field.window(y0 - halo, x0 - halo, h + 2 * halo, w + 2 * halo) > TISSUE
        here = wide[halo:-halo, halo:-halo]
        if not wide.any():  # glass: what the stain would give where there is no tissue
            rgb = np.empty((h, w, 3), np.uint8)
            rgb[:] = GLASS.astype(np.uint8)
        else:
            nuc = nuclei(seed, NUCLEI, y0, x0, h, w, 1.5, 3.5)
            rgb = he_stain(soften(wide, 3.0, halo), nuc, noise(seed, STAIN, y0, x0, h, w))
        if lesion is not None and label in ("IC", "PB") and touches(lesion, y0, x0, h, w):
            region = fill(lesion, y0, x0, h, w) & here
            if label == "IC":
                nests = nuclei(seed, NESTS, y0, x0, h, w, 25.0, 5.0) * region
                rgb[nests > 0.3] = (np.asarray(HAEMATOXYLIN) * 0.9).astype(np.uint8)
            else:
                rgb[region] = (rgb[region] * 0.7 + np.array([240, 170, 200]) * 0.3).astype(np.uint8)
        _paint_ducts(rgb, y0, x0, ducts, seed)
        return rgb

    truth = {"label": label, "name": BRACS_NAMES[label], "seed": seed, "mpp": mpp}
    prompt = {"template": "breast_wsi", "case_alias": f"BRACS-SYN-{seed:05d}"}
    return _write_case(out_dir / case_id, "breast_wsi", shape, paint, mpp, anns, truth, prompt)


def _node(shape: tuple[int, int], y0: int, x0: int, h: int, w: int, scale: int = 1) -> np.ndarray:
    """The lymph node (an oval) over a window of a grid of `scale` level-0 px per cell."""
    yy = ((y0 + np.arange(h)) * scale)[:, None].astype(np.float64)
    xx = ((x0 + np.arange(w)) * scale)[None, :].astype(np.float64)
    return np.asarray(
        ((xx - shape[1] / 2) / (shape[1] * 0.46)) ** 2 + ((yy - shape[0] / 2) / (shape[0] * 0.44)) ** 2 <= 1
    )


def make_lymph_case(
    out_dir: Path,
    case_id: str,
    seed: int,
    size: tuple[int, int] = (4096, 3072),
    mpp: float = 1.0,
    largest: str | None = None,
) -> Path:
    """A CAMELYON17-like lymph-node slide of `size` (width, height) px, painted tile by tile, with its
    metastases (and an exclusion fold) as polygons."""
    rng = np.random.default_rng(seed)
    largest = largest or ("negative", "itc", "micro", "macro")[seed % 4]
    shape = (size[1], size[0])
    layout = Layout(*shape)
    node_grid = _node(shape, 0, 0, *layout.shape, scale=layout.scale)
    anns: list[Annotation] = []
    diameters: list[float] = []
    if largest != "negative":
        sizes = [largest] + (["itc"] if largest != "itc" and seed % 2 else [])
        inner = layout.erode(node_grid, min(shape) * 0.05)
        inner = inner if inner.any() else node_grid
        for kind in sizes:
            diam_px = rng.uniform(*METASTASIS_MM[kind]) * 1000.0 / mpp
            margin = layout.erode(inner, diam_px / 2.0 + 4)
            poly = _polygon(layout.pick(margin if margin.any() else inner, rng), diam_px / 2.0, rng)
            anns.append(Annotation("Tumor", poly))
            diameters.append(_max_diameter(poly) * mpp / 1000.0)
    tumours = [a.exterior for a in anns]
    # an exclusion region (a fold) in tumour-free tissue, as CAMELYON annotators mark artefacts: the first
    # place of four (left, right, top, bottom of the node) that no metastasis touches
    fold = None
    for fx, fy in ((0.2, 0.5), (0.8, 0.5), (0.5, 0.2), (0.5, 0.8)):
        ex = _polygon((shape[1] * fx, shape[0] * fy), min(shape) * 0.05, rng)
        if not any(_overlap(t, ex) for t in tumours):
            fold = ex
            break
    if fold is not None:
        anns.append(Annotation("Exclusion", fold))
    halo = 17  # the soft node edge (σ 4 px)

    def paint(y0: int, x0: int, h: int, w: int) -> np.ndarray:
        node = _node(shape, y0 - halo, x0 - halo, h + 2 * halo, w + 2 * halo)
        here = node[halo:-halo, halo:-halo]
        if not node.any():  # glass around the node
            rgb = np.empty((h, w, 3), np.uint8)
            rgb[:] = GLASS.astype(np.uint8)
        else:
            nuc = nuclei(seed, NUCLEI, y0, x0, h, w, 40.0, 2.6) * here
            rgb = he_stain(soften(node, 4.0, halo), nuc, noise(seed, STAIN, y0, x0, h, w))
        for k, poly in enumerate(tumours):
            if not touches(poly, y0, x0, h, w):
                continue
            region = fill(poly, y0, x0, h, w)
            cells = nuclei(seed, TUMOUR_NUCLEI + k, y0, x0, h, w, 9.0, 5.5) * region
            tumour = he_stain(region.astype(np.float32), cells, noise(seed, TUMOUR_STAIN + k, y0, x0, h, w))
            rgb[region] = (tumour[region] * 0.8 + np.array([215, 150, 200]) * 0.2).astype(np.uint8)
        if fold is not None and touches(fold, y0, x0, h, w):
            region = fill(fold, y0, x0, h, w) & here
            rgb[region] = (rgb[region] * 0.6).astype(np.uint8)
        return rgb

    truth = {
        "tumor_presence": "no_tumor" if largest == "negative" else "tumor_present",
        "largest_metastasis": largest,
        "metastasis_diameters_mm": [round(d, 4) for d in diameters],
        "seed": seed,
        "mpp": mpp,
    }
    prompt = {"template": "lymph_node_wsi", "case_alias": f"C17-SYN-{seed:05d}"}
    case = _write_case(out_dir / case_id, "lymph_node_wsi", shape, paint, mpp, anns, truth, prompt)
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
