import pytest
from respin_quant.errors import RespinError


def test_lm_eval_registration_or_clear_error():
    from respin_quant import lm_eval_adapter

    try:
        import lm_eval.models.huggingface  # noqa: F401
    except ImportError:
        with pytest.raises(RespinError, match="pip install"):
            lm_eval_adapter.register()
        return
    lm_eval_adapter.register()
    lm_eval_adapter.register()  # idempotent
    from lm_eval.api.registry import MODEL_REGISTRY

    assert "respin_fakequant" in MODEL_REGISTRY
