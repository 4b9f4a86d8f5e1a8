"""The MedFlow benchmark modules (Table 4 of the paper), each declared once in `copilot/medflow/modules/`."""

from copilot.medflow.registry import BenchModule, Generate, make_case, make_cases, module, modules, register, score_case

modules()  # every module declared when the package is, so the scoring side's facts are complete
from copilot.medflow.registry import modules  # noqa: E402 (importing the `modules` package rebound the name)

__all__ = ["BenchModule", "Generate", "make_case", "make_cases", "module", "modules", "register", "score_case"]
