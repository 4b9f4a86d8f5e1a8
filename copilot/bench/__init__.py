"""The MedFlow benchmark: case packs, prompts, answer parsers, scoring, batch runs and reports."""
