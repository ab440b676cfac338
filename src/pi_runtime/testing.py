"""Test doubles for Pi's tests and yours: deterministic models."""

from .models.function import FunctionModel
from .models.replay import ReplayModel
from .models.scripted import ScriptedModel, ScriptStep, load_script

__all__ = ["FunctionModel", "ReplayModel", "ScriptStep", "ScriptedModel", "load_script"]
