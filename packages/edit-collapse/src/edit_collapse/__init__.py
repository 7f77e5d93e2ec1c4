"""edit-collapse: parameter-based knowledge editing against retrieval, with collapse diagnostics.

Locate-then-edit editors (FT-L/FT-M, ROME, MEMIT, AlphaEdit) with EasyEdit's conventions, a
retrieval baseline that never touches weights (selective contextual reasoning, reconstructed)
and IKE, EasyEdit's metrics (reliability, generalisation, locality, portability; teacher-forced
or generated), capability retention through lm-eval, and the dimensional-collapse diagnostics of
Ren et al. (ICML 2026): relative change ``R_k`` of each singular direction of the hidden states.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("edit-collapse")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="edit-collapse",
    paper=(
        "Revisiting Parameter-Based Knowledge Editing in Large Language Models: Theoretical "
        "Limits and Empirical Evidence (ICML 2026)"
    ),
    summary="FT/ROME/MEMIT/AlphaEdit vs retrieval: Rel/Gen/Loc/Port, capability retention, R_k",
    demo="edit_collapse.demo:run",
    package="edit-collapse",
    tags=("knowledge-editing", "rome", "memit", "retrieval", "representation-geometry"),
)

_LAZY = {
    "EditConfig": ".config",
    "load_hparams": ".config",
    "easyedit_defaults": ".config",
    "auto_module_templates": ".config",
    "EditRequest": ".requests",
    "load_requests": ".requests",
    "world_requests": ".requests",
    "EditHandle": ".editors",
    "Editor": ".editors",
    "FTEditor": ".editors",
    "ROMEEditor": ".editors",
    "MEMITEditor": ".editors",
    "AlphaEditEditor": ".editors",
    "make_editor": ".factory",
    "RetrievalEditor": ".retrieval",
    "IKEEditor": ".retrieval",
    "EditedGenerator": ".retrieval",
    "PromptFormat": ".retrieval",
    "layer_stats": ".stats",
    "run_edit_session": ".session",
    "SessionResult": ".session",
    "teacher_forced_acc": ".metrics",
    "reasoning_accuracy": ".metrics",
    "representation_geometry": ".geometry",
    "relative_change": ".geometry",
    "collapse_summary": ".geometry",
    "evaluate_capabilities": ".capability",
    "EasyEditCompat": ".compat",
    "EditCollapseError": ".errors",
    "EditInputError": ".errors",
    "EditDivergedError": ".errors",
    "StaleStatsError": ".errors",
    "UnsupportedModelError": ".errors",
    "JudgeUnavailableError": ".errors",
    "TargetNotReachedWarning": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, submodules=["world", "tiny"])
