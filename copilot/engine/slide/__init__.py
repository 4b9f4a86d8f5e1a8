"""The slide engine: whole-slide sources, tile decoding, overlays and the embedded QuPath-like viewer."""
