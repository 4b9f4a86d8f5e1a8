"""Who a model is, for grouping the tables as the paper does: its access type (closed-source or open-weight,
Table 5) and its family (general-purpose, medical-domain or native 3D VLM, Tables 1 and 6).

`MODELS` is a small editable table of name patterns (case-insensitive substrings, first match wins); a file
named by `MEDCOPILOT_MODEL_TABLE` (lines `pattern<TAB>access<TAB>family`, `#` comments) is read first, so a
run can declare its own models. A model no pattern matches is closed-source when its policy names a hosted
provider (`openai:`, `anthropic:`, `gemini:`), open-weight otherwise, and general-purpose unless
`MEDCOPILOT_MEDICAL_MODELS` (`bench report --medical`) names it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from copilot.llm.spec import provider_of

ACCESS = ("closed", "open")
FAMILIES = ("general", "medical", "native3d")
ACCESS_TITLES = {"closed": "Closed-source models", "open": "Open-weight / open-source models"}
FAMILY_TITLES = {"general": "General-purpose models", "medical": "Medical-domain models",
                 "native3d": "Native 3D VLMs"}  # fmt: skip
MEDICAL_PATTERNS = ("medgemma", "lingshu", "radfm", "m3d", "llava-med", "biomedgpt", "med-flamingo", "huatuo",
                    "meditron", "medical")  # fmt: skip


class ModelInfo(NamedTuple):
    """A model's access type and family."""

    access: str
    family: str


MODELS: tuple[tuple[str, str, str], ...] = (  # (pattern, access, family): the paper's models, then families
    ("m3d", "open", "native3d"),
    ("radfm", "open", "native3d"),
    ("medgemma", "open", "medical"),
    ("lingshu", "open", "medical"),
    ("llava-med", "open", "medical"),
    ("huatuo", "open", "medical"),
    ("meditron", "open", "medical"),
    ("gpt-oss", "open", "general"),
    ("gpt", "closed", "general"),
    ("gemini", "closed", "general"),
    ("claude", "closed", "general"),
    ("qwen", "open", "general"),
    ("llama", "open", "general"),
    ("gemma", "open", "general"),
    ("mistral", "open", "general"),
)


def _declared() -> list[tuple[str, str, str]]:
    """The run's own declarations (`MEDCOPILOT_MODEL_TABLE`), then the built-in table."""
    path = os.environ.get("MEDCOPILOT_MODEL_TABLE")
    own: list[tuple[str, str, str]] = []
    if path:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = [p.strip() for p in line.split("\t")]
            if len(parts) != 3 or parts[1] not in ACCESS or parts[2] not in FAMILIES:
                raise ValueError(f"{path}:{n}: expected pattern<TAB>{'|'.join(ACCESS)}<TAB>{'|'.join(FAMILIES)}")
            own.append((parts[0].lower(), parts[1], parts[2]))
    return [*own, *MODELS]


def medical_models() -> tuple[str, ...]:
    """Name patterns of medical-domain models: the built-in list, or `MEDCOPILOT_MEDICAL_MODELS` when set."""
    env = os.environ.get("MEDCOPILOT_MEDICAL_MODELS")
    return tuple(p.strip().lower() for p in env.split(",") if p.strip()) if env else MEDICAL_PATTERNS


def model_info(model: str, policy: str = "") -> ModelInfo:
    """The access type and family of a model (see the module's note for the fallbacks)."""
    name = model.lower()
    declared = next(((a, f) for pattern, a, f in _declared() if pattern in name), None)
    provider = provider_of(policy)
    access = declared[0] if declared else ("closed" if provider is not None and provider.hosted else "open")
    family = declared[1] if declared else "general"
    if family != "native3d" and (os.environ.get("MEDCOPILOT_MEDICAL_MODELS") or not declared):
        family = "medical" if any(p in name for p in medical_models()) else "general"
    return ModelInfo(access, family)
