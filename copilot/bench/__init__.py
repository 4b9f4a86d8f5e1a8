"""MedFlow scoring and reporting: answer parsers, per-module scoring rules, process and coverage metrics, tables,
episode pages and reports (the module list itself lives in `copilot/medflow/`)."""
