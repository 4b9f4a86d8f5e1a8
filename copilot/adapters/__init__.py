"""Adapters that read the public datasets in their published layouts into MedFlow case packs."""

from __future__ import annotations

from collections.abc import Callable

from copilot.adapters.bracs import adapt_bracs
from copilot.adapters.camelyon17 import adapt_camelyon17
from copilot.adapters.common import AdapterReport
from copilot.adapters.lumiere import adapt_lumiere
from copilot.adapters.nsclc import adapt_nsclc
from copilot.adapters.ucsf_pdgm import adapt_ucsf_pdgm

ADAPTERS: dict[str, Callable[..., AdapterReport]] = {
    "ucsf_pdgm": adapt_ucsf_pdgm,
    "lumiere": adapt_lumiere,
    "nsclc": adapt_nsclc,
    "bracs": adapt_bracs,
    "camelyon17": adapt_camelyon17,
}

__all__ = ["ADAPTERS", "adapt_bracs", "adapt_camelyon17", "adapt_lumiere", "adapt_nsclc", "adapt_ucsf_pdgm"]
