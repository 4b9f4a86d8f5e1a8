"""Installing MedCopilot's core into Slicer's Python: only when it is missing, and only after the user says yes.

The packaged extension carries the module alone; the core is the published `medcopilot` wheel of the same version
(or, when the module runs from a source checkout, that checkout, still asked first). On Slicer 5.11 and later the
request goes through `slicer.packaging.pip_ensure`, which shows what it would install and waits for OK (it raises
`RuntimeError` when declined, and installs nothing in a `--testing` run); on older Slicer the module asks with a
confirmation of its own, then calls `slicer.util.pip_install`. Nothing here imports Slicer or Qt: the module passes
in the calls, so the decisions are tested without Slicer (tests/test_slicer_index.py).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

CORE_VERSION = "0.1.0"  # the core this module was written against (tests hold it to pyproject.toml's version)
REQUESTER = "MedCopilot"
PipEnsure = Callable[..., object]  # slicer.packaging.pip_ensure(requirements, prompt_install=…, requester=…)
Confirm = Callable[[str, str], bool]  # (message, details) -> the user's OK
PipInstall = Callable[[str], object]  # slicer.util.pip_install(requirement)


class CoreNotInstalled(RuntimeError):
    """The core is missing and was not installed (declined, or a test run): the message says how to install it."""


def source_checkout(module_file: str | Path) -> Path | None:
    """The source tree this module runs from, when it is one (its pyproject names the `medcopilot` project and the
    core sits beside it); read without tomllib, which Slicer 5.8's Python 3.9 lacks."""
    root = Path(module_file).resolve().parents[2]
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    named = re.search(r'(?m)^name\s*=\s*"medcopilot"\s*$', pyproject) is not None
    return root if named and (root / "copilot" / "__init__.py").is_file() else None


def core_requirement(checkout: Path | None) -> str:
    """What to install: the source checkout the module runs from, else the published wheel of its version."""
    return f"medcopilot @ {checkout.as_uri()}" if checkout is not None else f"medcopilot=={CORE_VERSION}"


def core_present() -> bool:
    return importlib.util.find_spec("copilot") is not None


def _later(requirement: str, why: str) -> CoreNotInstalled:
    return CoreNotInstalled(
        f"MedCopilot's core is not installed ({why}). Nothing was changed; to install it later, press the module's "
        f"button again or run in Slicer's Python console: slicer.util.pip_install({requirement!r})"
    )


def ensure_core(
    requirement: str,
    pip_ensure: PipEnsure | None,
    confirm: Confirm,
    pip_install: PipInstall,
    present: Callable[[], bool] = core_present,
) -> str:
    """'present' (nothing asked) or 'installed' (the user agreed); otherwise CoreNotInstalled, nothing changed."""
    if present():
        return "present"
    if pip_ensure is not None:
        try:
            pip_ensure([requirement], prompt_install=True, requester=REQUESTER)
        except RuntimeError:  # pip_ensure's answer to Cancel
            raise _later(requirement, "installation declined") from None
        if not present():  # a --testing run: pip_ensure installs nothing there
            raise _later(requirement, "Slicer's testing mode installs no packages")
        return "installed"
    message = (
        "MedCopilot needs its core Python package, which is not installed. Install it into Slicer's Python now? "
        "It is downloaded from the Python Package Index (or taken from this source tree)."
    )
    if not confirm(message, requirement):
        raise _later(requirement, "installation declined")
    pip_install(requirement)
    if not present():
        raise _later(requirement, "pip finished but the package cannot be imported")
    return "installed"
