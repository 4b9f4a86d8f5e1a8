"""The MedFlow benchmark modules (Table 4 of the paper), each declared once in `copilot/medflow/modules/`."""

from copilot.medflow.registry import BenchModule, Generate, make_case, make_cases, module, modules, register, score_case

__all__ = ["BenchModule", "Generate", "make_case", "make_cases", "module", "modules", "register", "score_case"]
