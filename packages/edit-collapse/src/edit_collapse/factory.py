"""Build an editor by method name."""

from __future__ import annotations

from typing import Any

from edit_collapse.config import EditConfig, easyedit_defaults
from edit_collapse.errors import EditInputError

METHODS = ("ft", "ft-m", "ft-l", "rome", "memit", "alphaedit", "retrieval", "ike")


def make_editor(method: str, cfg: EditConfig | None = None, **kw: Any) -> Any:
    """``ft``/``ft-m``/``ft-l``/``rome``/``memit``/``alphaedit`` (with ``cfg``, default
    EasyEdit's Llama-3-8B values) or ``retrieval``/``ike`` (keyword arguments of the editor)."""
    from edit_collapse import editors as E
    from edit_collapse import retrieval as Rt

    m = method.lower()
    if m == "retrieval":
        return Rt.RetrievalEditor(**kw)
    if m == "ike":
        return Rt.IKEEditor(**kw)
    alg = {"ft": "FT-M", "ft-m": "FT-M", "ft-l": "FT-L", "rome": "ROME", "memit": "MEMIT",
           "alphaedit": "AlphaEdit"}.get(m)  # fmt: skip
    if alg is None:
        raise EditInputError(f"method={method!r} is not one of {METHODS}")
    cfg = cfg or easyedit_defaults(alg)
    cls = {
        "FT": E.FTEditor,
        "ROME": E.ROMEEditor,
        "MEMIT": E.MEMITEditor,
        "AlphaEdit": E.AlphaEditEditor,
    }[cfg.alg_name]
    return cls(cfg, **kw)
