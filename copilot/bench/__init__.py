"""MedFlow scoring and reporting, in floors that import only downwards: `scoring` (parsers, per-module rules,
statistics), `measures` (process measures from traces), `tables` (the paper's tables from result rows) and `report`
(the run's pages). The module list itself lives in `copilot/medflow/`."""
