"""Hanging protocols as data (`resources/hanging_protocols.json`): how a study is first shown, by the modalities of
its open series — the layout, a window preset per modality, a PET's window in SUV, a fusion of a functional
series over an anatomical one. Applied by the system through the audited handlers, so a trace shows exactly what
was set up."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from copilot.engine.volume.display import PRESET_NAMES
from copilot.engine.volume.view_rules import LAYOUTS
from copilot.resources import resources_dir


@dataclass(frozen=True)
class HangingRule:
    """One rule: the modalities it needs (all present), and what it sets."""

    name: str
    modalities: tuple[str, ...]
    layout: str | None = None
    presets: dict[str, str] = field(default_factory=dict)
    fusion: dict[str, Any] | None = None
    suv_windows: dict[str, tuple[float, float]] = field(default_factory=dict)  # modality → SUVbw range shown


def load_rules(data: dict[str, Any] | None = None) -> list[HangingRule]:
    """The rules of the shipped file (or of `data`); a layout or preset the viewer does not know is refused."""
    raw = data if data is not None else json.loads((resources_dir() / "hanging_protocols.json").read_text("utf-8"))
    rules = []
    for r in raw["rules"]:
        try:
            suv = {str(m): (float(lo), float(hi)) for m, (lo, hi) in dict(r.get("suv_windows", {})).items()}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"hanging protocol {r['name']!r}: an SUV window is [low, high]") from exc
        if any(not 0 <= lo < hi for lo, hi in suv.values()):
            raise ValueError(f"hanging protocol {r['name']!r}: an SUV window runs from 0 or more, low before high")
        rule = HangingRule(r["name"], tuple(r["modalities"]), r.get("layout"), dict(r.get("presets", {})),
                           r.get("fusion"), suv)  # fmt: skip
        if rule.layout is not None and rule.layout not in LAYOUTS:
            raise ValueError(f"hanging protocol {rule.name!r}: unknown layout {rule.layout!r}")
        bad = [p for p in rule.presets.values() if p not in PRESET_NAMES]
        if bad:
            raise ValueError(f"hanging protocol {rule.name!r}: unknown window preset {bad[0]!r}")
        rules.append(rule)
    return rules


def matching_rule(modalities: list[str], rules: list[HangingRule]) -> HangingRule | None:
    """The first rule whose modalities are all among the open series'."""
    return next((r for r in rules if set(r.modalities) <= set(modalities)), None)


def hang(session: Any, rules: list[HangingRule] | None = None) -> HangingRule | None:
    """Apply the matching rule to a radiology session by system calls (layout, presets, fusion); the rule, or None."""
    state = session.call("get_viewer_state", {"include_volumes": True}, actor="system")
    inventory = state.result.get("inventory", []) if state.ok else []
    by_modality: dict[str, str] = {}
    for v in inventory:
        by_modality.setdefault(str(v.get("modality", "")), str(v["id"]))
    rule = matching_rule(list(by_modality), rules if rules is not None else load_rules())
    if rule is None:
        return None
    for modality, preset in rule.presets.items():
        session.call("window_preset", {"preset": preset, "volume_id": by_modality[modality], "size": 64},
                     actor="system")  # fmt: skip
    if rule.fusion is not None:
        session.call("fusion", {"background_volume_ref": by_modality[rule.fusion["background"]],
                                "foreground_volume_ref": by_modality[rule.fusion["foreground"]],
                                "foreground_opacity": float(rule.fusion.get("opacity", 0.5)), "size": 64},
                     actor="system")  # fmt: skip
    for modality, (lo, hi) in rule.suv_windows.items():  # a PET in SUV, when its tags allow it
        _suv_window(session, by_modality.get(modality), lo, hi)
    if rule.layout is not None:
        session.call("set_layout", {"layout": rule.layout, "size": 64}, actor="system")
    session.note("hanging_protocol", {"rule": rule.name})
    return rule


def _suv_window(session: Any, vid: str | None, lo: float, hi: float) -> None:
    """The PET `vid` windowed to SUVbw lo–hi by a system `wl` call (nothing when it is not shown or has no SUV)."""
    from copilot.panel.pet_window import suv_factor, suv_window

    data = session.scene_data() or {}
    state = session.snapshot()
    for key, volume in (("foreground_volume", data.get("foreground")), ("background_volume", data.get("volume"))):
        if vid is not None and state.get(key) == vid and (factor := suv_factor(volume)) is not None:
            window, level = suv_window(factor, lo, hi)
            session.call("wl", {"window": window, "level": level, "volume_id": vid, "size": 64}, actor="system")
            return
