"""Which policies can run on a study, and the model conversation for it.

The offline policies (`baseline`, `prior`) answer benchmark questions: they need a case pack of a MedFlow
module and are unavailable, with a one-line reason, on any other study. A model policy on a study without a
module, or with a question typed, is a study conversation; on a case pack without a question it is the
benchmark episode.
"""

from __future__ import annotations

from typing import Any

from copilot.agent.baselines import no_baseline
from copilot.agent.settings import AgentSettings
from copilot.llm.spec import is_model_policy
from copilot.llm.spec import service_problem as spec_problem
from copilot.medflow.policies import make_policy
from copilot.medflow.registry import modules
from copilot.panel import ocr, optin
from copilot.panel.burned_in import burned_in_series
from copilot.panel.optin import Ask
from copilot.study.agent import StudyConversation
from copilot.study.privacy import Redactor, study_identifiers


class PolicyUnavailable(ValueError):
    """A policy that cannot run on this study (the message says why, in one line)."""


def is_model(spec: str) -> bool:
    return is_model_policy(spec)


def policy_problem(spec: str, case: Any) -> str | None:
    """Why a policy cannot run on a study (one line), or None."""
    module = getattr(case, "module", "")
    if spec in ("baseline", "prior") and module not in modules():
        return (
            f"the {spec} policy answers benchmark questions and needs a MedFlow case pack; this study has no "
            "benchmark module — ask the model instead (--policy openai)"
        )
    if spec == "baseline" and modules()[module].baseline() is None:  # a module may offer none (a plug-in's)
        return no_baseline(module)
    return None


def service_problem(settings: AgentSettings) -> str | None:
    """Why no request can be made (one line naming the setting), or None."""
    return spec_problem(settings.spec())


def model_settings(spec: str, model: str | None = None, base_url: str | None = None, **more: Any) -> AgentSettings:
    """Settings of a model policy spec from the environment and the given overrides."""
    return AgentSettings.for_policy(spec, model=model, base_url=base_url, **more)


def redactor_for(case: Any, kind: str) -> Redactor:
    """The identifiers of a study's own files, ready to be removed from requests (with every UID and every
    absolute path of this machine: a refusal or a result naming a file says where only by its name)."""
    return Redactor(study_identifiers(case.root, dict(case.inputs or {}), kind), paths=True)  # no path of here


def conversation(
    settings: AgentSettings, case: Any, kind: str, ask: Ask | None = None, **hooks: Any
) -> StudyConversation:
    """A study conversation for a study (raises PolicyUnavailable when no service is configured, or when the
    clinician, asked through `ask` or not at all, has not agreed to what it would send; see `consent`)."""
    problem = service_problem(settings) or consent(settings, case, ask)
    if problem:
        raise PolicyUnavailable(problem)
    redactor = redactor_for(case, kind)
    if not optin.is_local(service_url(settings)) and ocr.available():  # images leave the machine: read them first
        redactor.image_guard = ocr.ImageGuard(redactor.found_in)
        redactor.images = redactor.image_guard.data_url
    return StudyConversation(settings, redactor, **hooks)


def service_url(settings: AgentSettings) -> str:
    """The URL requests will go to (the provider's own when none is set)."""
    return optin.service_url(settings)


def consent(settings: AgentSettings, case: Any, ask: Ask | None) -> str | None:
    """Why nothing may be sent yet (one line), or None: a service not on this machine needs the clinician's opt-in
    to text and views (`copilot.panel.optin`, asked once and remembered); a series that may carry burnt-in
    patient details (`copilot.panel.burned_in`) needs their choice to send it, whatever the service."""
    url = service_url(settings)
    try:
        optin.ensure(url, ("text", "views"), ask)
    except (optin.OptInNeeded, ValueError) as exc:
        return str(exc)
    for series in burned_in_series(case.root, dict(case.inputs or {})):
        if optin.burned_in_allowed(series.series_uid):
            continue
        line = (f"series {series.label} may carry patient details burnt into its pixels ({series.reason}); "
                "send its views to the model anyway?")  # fmt: skip
        if ask is not None and ask(line):
            optin.allow_burned_in(series.series_uid)
            continue
        return (f"nothing was sent: series {series.label} may carry patient details burnt into its pixels "
                f"({series.reason}) and you did not choose to send it")  # fmt: skip
    return None


def study_policy(spec: str, case: Any, kind: str, question: str = "", **settings: Any) -> Any:
    """The policy a spec names on a study: a conversation for a model with a question or without a module."""
    problem = policy_problem(spec, case)
    if problem:
        raise PolicyUnavailable(problem)
    if is_model(spec) and (question or getattr(case, "module", "") not in modules()):
        return conversation(model_settings(spec, **settings), case, kind)
    return make_policy(spec, **settings)
