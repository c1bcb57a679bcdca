"""Import a model_repository/<name>/1/model.py as a plain module (no Triton needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_model_module(name: str):
    path = REPO / "model_repository" / name / "1" / "model.py"
    spec = importlib.util.spec_from_file_location(f"gputok_triton_model_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def config_parameters(name: str) -> dict:
    """The `parameters` of model_repository/<name>/config.pbtxt, shaped as Triton passes them."""
    from gputok.serve import pbtxt

    return pbtxt.parameters(REPO / "model_repository" / name / "config.pbtxt")


def config_outputs(name: str) -> list[str]:
    """The output names model_repository/<name>/config.pbtxt declares, in its order."""
    from gputok.serve import pbtxt

    config = pbtxt.read_config(REPO / "model_repository" / name / "config.pbtxt")
    return [o.name for o in config.output]
