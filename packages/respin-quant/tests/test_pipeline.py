"""Save/load round trip, the quantised pipeline, and the bad-input behaviour (clear errors)."""

import copy

import pytest
import torch
from conftest import make_model
from respin_quant.arch import exact_norms
from respin_quant.config import QuantConfig, RotationConfig
from respin_quant.errors import (
    CalibrationDataError,
    RespinConfigError,
    RespinError,
    RotationError,
    UnsupportedModelError,
)
from respin_quant.learn import learn_rotations
from respin_quant.pipeline import load_quantized, quantize_pipeline, save_quantized
from respin_quant.ptq import quantize
from respin_quant.rotation import RotationSet, apply_rotations, init_rotations, polar


def _layerwise(model):
    rs = init_rotations(model, "respin", 0)
    g = torch.Generator().manual_seed(9)
    rs.R_ffn = [
        polar(r + 0.05 * torch.randn(r.shape, generator=g, dtype=torch.float64)) for r in rs.R_ffn
    ]
    return rs


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("rank", [8, "full"])
def test_save_load_round_trip_exact(tmp_path, arch, ids, rank, packed):
    model = make_model(arch)
    apply_rotations(model, _layerwise(model), rank)
    quantize(model, QuantConfig(w_bits=4, a_bits=4, k_bits=4, v_bits=4))
    with torch.no_grad():
        ref = model(ids).logits
    save_quantized(model, tmp_path / "q", report={"x": 1}, packed=packed)
    weights = "respin_packed.safetensors" if packed else "model.safetensors"
    for f in (
        weights,
        "config.json",
        "respin_transitions.safetensors",
        "rotations.safetensors",
        "respin_config.json",
        "report.json",
    ):
        assert (tmp_path / "q" / f).exists(), f
    other = "model.safetensors" if packed else "respin_packed.safetensors"
    assert not (tmp_path / "q" / other).exists()
    # the in-memory model keeps working after saving (KV wrapper restored)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref)
        loaded = load_quantized(tmp_path / "q")
        assert torch.equal(loaded(ids).logits, ref)
    rs = RotationSet.load(tmp_path / "q" / "rotations.safetensors", loaded)
    assert rs.orthogonality_error() < 1e-10
    # a loaded packed model saves again to the same packed tensors and header
    if packed:
        from safetensors import safe_open

        save_quantized(loaded, tmp_path / "q2")
        a = safe_open(str(tmp_path / "q" / weights), "pt")
        b = safe_open(str(tmp_path / "q2" / weights), "pt")
        assert a.metadata() == b.metadata() and set(a.keys()) == set(b.keys())
        assert all(torch.equal(a.get_tensor(k), b.get_tensor(k)) for k in a.keys())  # noqa: SIM118


def test_kv_quant_changes_output_and_qk_hadamard_is_exact_without_quant(ids):
    model = make_model("llama")
    a = apply_rotations(copy.deepcopy(model), init_rotations(model, "quarot", 0), 0)
    b = copy.deepcopy(a)
    quantize(a, QuantConfig(w_bits=16, a_bits=16))
    b.config.respin["online_had_qk"] = True
    quantize(b, QuantConfig(w_bits=16, a_bits=16, k_bits=16, v_bits=16))
    from respin_quant.kv import attach_kv_quant

    attach_kv_quant(b, 16, 16, 128, False, True)  # Hadamard on Q and K, no quantisation
    with torch.no_grad():
        assert float((a(ids).logits - b(ids).logits).abs().max()) < 1e-4
        c = quantize(
            apply_rotations(copy.deepcopy(model), init_rotations(model, "quarot", 0), 0),
            QuantConfig(w_bits=16, a_bits=16, k_bits=3, v_bits=3),
        )
        assert float((a(ids).logits - c(ids).logits).abs().max()) > 1e-3


def test_pipeline_gptq_and_spinquant_smoke(ids):
    model = make_model("qwen2", hidden=32, inter=64)
    calib = torch.randint(0, 40, (8, 16), generator=torch.Generator().manual_seed(0))
    q = QuantConfig(w_bits=4, a_bits=8, weight_quantizer="gptq", gptq_nsamples=8)
    rot = RotationConfig(
        method="spinquant", steps=2, batch_size=4, calib_nsamples=8, calib_seqlen=16
    )
    m, rep = quantize_pipeline(model, None, q, rot, calib)
    assert rep["method"] == "spinquant" and rep["rotation_orthogonality_error"] < 1e-10
    assert rep["transition_macs"] == 0  # global rotation: every transition is I
    assert torch.isfinite(m(ids).logits).all()


# ----------------------------------------------------------------------------- bad input


def test_unsupported_architecture():
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=40))
    with pytest.raises(UnsupportedModelError, match="llama, mistral, qwen2"):
        init_rotations(m, "quarot")
    with pytest.raises(NotImplementedError):
        quantize(m, QuantConfig())


def test_apply_twice_and_quantize_before_fusing_rejected():
    model = make_model("llama")
    rs = init_rotations(model, "quarot", 0)
    apply_rotations(model, rs, 0)
    with pytest.raises(RotationError, match="already applied"):
        apply_rotations(model, rs, 0)
    other = make_model("llama")
    quantize(other, QuantConfig())
    with pytest.raises(RotationError, match="before quantisation"):
        apply_rotations(other, rs, 0)
    with pytest.raises(RotationError, match="already quantised"):
        quantize(other, QuantConfig())


def test_bad_rank_and_group_size_and_bits():
    model = make_model("llama")
    rs = init_rotations(model, "respin", 0)
    with pytest.raises(RespinConfigError, match="residual_rank"):
        apply_rotations(copy.deepcopy(model), rs, 65)
    with pytest.raises(RespinConfigError, match="residual_rank"):
        apply_rotations(copy.deepcopy(model), rs, -1)
    with pytest.raises(RespinConfigError, match="does not divide"):
        quantize(copy.deepcopy(model), QuantConfig(w_groupsize=48))
    with pytest.raises(ValueError, match=r"2\.\.16"):
        QuantConfig(w_bits=20)
    with pytest.raises(ValueError, match="residual_rank"):
        RotationConfig(residual_rank=-3)
    with pytest.raises(ValueError, match="asymmetric weight"):
        QuantConfig(w_sym=False)  # accepted silently before: now says it is not implemented


def test_calibration_errors():
    model = make_model("llama", hidden=32, inter=64)
    short = torch.randint(0, 40, (8, 16))
    with pytest.raises(CalibrationDataError, match="calib_seqlen"):
        learn_rotations(model, short, RotationConfig(calib_seqlen=32, batch_size=4), QuantConfig())
    with pytest.raises(CalibrationDataError, match="gptq_nsamples"):
        quantize(
            copy.deepcopy(model), QuantConfig(weight_quantizer="gptq", gptq_nsamples=16), short
        )
    with pytest.raises(CalibrationDataError):
        quantize(copy.deepcopy(model), QuantConfig(weight_quantizer="gptq"), None)


def test_kv_quant_needs_pow2_head_dim():
    model = make_model("llama", hidden=48, heads=4, kv_heads=2, inter=64)  # head dim 12
    m = apply_rotations(
        copy.deepcopy(model), init_rotations(model, "quarot", 0), 0, online_had_down=True
    )
    with pytest.raises(RespinConfigError, match="power-of-two head dim"):
        quantize(m, QuantConfig(k_bits=4))


def test_online_hadamard_needs_power_of_two_factor():
    model = make_model("llama", inter=45)
    with pytest.raises(RespinConfigError, match="online_dense"):
        apply_rotations(model, init_rotations(model, "quarot", 0), 0)
    m2 = make_model("llama", inter=45)
    apply_rotations(m2, init_rotations(m2, "quarot", 0), 0, online_dense=True)
    m3 = make_model("llama", inter=48)  # 48 = 3 x 16: block Hadamard only when asked for
    with pytest.raises(RespinConfigError, match="online_block"):
        apply_rotations(m3, init_rotations(m3, "quarot", 0), 0)
    apply_rotations(m3, init_rotations(m3, "quarot", 0), 0, online_block=True)
    assert m3.config.respin["online_block"] is True


def test_rotation_file_checks(tmp_path):
    model = make_model("llama")
    rs = init_rotations(model, "respin", 0)
    rs.save(tmp_path / "r.safetensors")
    small = make_model("llama", hidden=32, inter=64)
    with pytest.raises(RotationError, match="does not fit"):
        RotationSet.load(tmp_path / "r.safetensors", small)
    rs.R_ffn[0] = rs.R_ffn[0] * 1.01
    rs.save(tmp_path / "bad.safetensors")
    with pytest.raises(RotationError, match="not orthogonal"):
        RotationSet.load(tmp_path / "bad.safetensors")


def test_transition_rank_mismatch(tmp_path, ids):
    import json

    model = make_model("llama")
    apply_rotations(model, _layerwise(model), 8)
    quantize(model, QuantConfig(w_bits=16, a_bits=16))
    save_quantized(model, tmp_path / "q")
    p = tmp_path / "q" / "respin_config.json"
    meta = json.loads(p.read_text())
    meta["residual_rank"] = 4
    p.write_text(json.dumps(meta))
    with pytest.raises(RotationError, match="rank 4"):
        load_quantized(tmp_path / "q")


def test_errors_share_one_base():
    from llmcore.errors import ConfigError, LLMCoreError

    for e in (CalibrationDataError, RespinConfigError, RotationError, UnsupportedModelError):
        assert issubclass(e, RespinError) and issubclass(e, LLMCoreError)
    assert issubclass(RespinConfigError, ConfigError) and issubclass(RespinConfigError, ValueError)


def test_perplexity_is_the_windowed_mean_nll(ids):
    """Non-overlapping windows scored on their own: equals exp(mean NLL) computed directly in
    float64 over each window's tokens 1..n-1 (both for 2-D rows and a 1-D stream whose
    remainder is dropped)."""
    import math

    from respin_quant.evaluate import perplexity

    model = make_model("llama")
    stream = torch.randint(0, 40, (77,), generator=torch.Generator().manual_seed(3))
    w = stream[:72].reshape(3, 24)
    with torch.no_grad():
        lp = torch.log_softmax(model(w).logits[:, :-1].double(), -1)
    nll = -lp.gather(-1, w[:, 1:, None]).sum().item()
    want = math.exp(nll / (3 * 23))
    assert perplexity(model, w, seqlen=24) == pytest.approx(want, rel=1e-6)
    assert perplexity(model, stream, seqlen=24) == pytest.approx(want, rel=1e-6)
    assert perplexity(model, w[:1], seqlen=24) != pytest.approx(want, rel=1e-3)


def test_package_exports_are_lazy():
    import subprocess
    import sys

    code = (
        "import sys, respin_quant\n"
        "assert 'torch' not in sys.modules\n"
        "assert 'RotationConfig' in dir(respin_quant)\n"
        "assert respin_quant.RespinError.__module__ == 'respin_quant.errors'\n"
        "assert 'torch' not in sys.modules\n"
        "respin_quant.perplexity\n"
        "assert 'torch' in sys.modules\n"
        "try:\n    respin_quant.nope\nexcept AttributeError:\n    pass\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_float64_exact_helper_matches_stock_norm(ids):
    m = make_model("llama", torch.float64)
    with torch.no_grad():
        a = m(ids).logits
        b = exact_norms(copy.deepcopy(m))(ids).logits
    assert float((a - b).abs().max()) < 1e-5


def test_w4a16_is_weight_only_and_closer_than_w4a4(ids):
    model = make_model("llama")
    with torch.no_grad():
        ref = model(ids).logits
        w4a16 = quantize(copy.deepcopy(model), QuantConfig(w_bits=4, a_bits=16))
        w4a4 = quantize(copy.deepcopy(model), QuantConfig(w_bits=4, a_bits=4))
        d16 = float((w4a16(ids).logits - ref).abs().max())
        d4 = float((w4a4(ids).logits - ref).abs().max())
    assert 0 < d16 < d4
    assert QuantConfig(w_bits=4, a_bits=16).label == "W4A16"
