"""Hanging protocols as data (`resources/hanging_protocols.json`): how a study is first shown, by the modalities of
its open series — the layout, a window preset per modality, a fusion of a functional series over an anatomical
one. Applied by the system through the audited handlers, so a trace shows exactly what was set up."""

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


def load_rules(data: dict[str, Any] | None = None) -> list[HangingRule]:
    """The rules of the shipped file (or of `data`); a layout or preset the viewer does not know is refused."""
    raw = data if data is not None else json.loads((resources_dir() / "hanging_protocols.json").read_text("utf-8"))
    rules = []
    for r in raw["rules"]:
        rule = HangingRule(r["name"], tuple(r["modalities"]), r.get("layout"), dict(r.get("presets", {})),
                           r.get("fusion"))  # fmt: skip
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
    if rule.layout is not None:
        session.call("set_layout", {"layout": rule.layout, "size": 64}, actor="system")
    session.note("hanging_protocol", {"rule": rule.name})
    return rule
