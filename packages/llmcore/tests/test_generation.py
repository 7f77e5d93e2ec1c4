"""Tests of llmcore.generation: sampling params, the HF backend, vLLM mapping, the HTTP backend.

Everything runs offline on CPU with a tiny random Llama built in code. The HTTP test starts the
real ``transformers serve`` on loopback.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from llmcore.errors import BackendError, ConfigError, MissingExtraError, ModelLoadError
from llmcore.generation import (
    Completion,
    GenerationBackend,
    HFBackend,
    OpenAIBackend,
    SamplingParams,
    VLLMBackend,
    get_backend,
    vllm_sampling_kwargs,
)
from llmcore.generation.vllm_backend import completions_from_request_output

torch.set_num_threads(1)

# Different lengths on purpose: batching them needs left padding.
PROMPTS = [
    "the cat sat on",
    "a dog",
    "big red house and the small blue tree by the river",
    "ran",
]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Llama + BPE tokenizer saved with save_pretrained."""
    from tinymodels import random_llama, toy_tokenizer

    tok = toy_tokenizer()
    # Wider than the 0.02 default init so greedy argmax gaps dwarf float noise from padding.
    model = random_llama(tok, kv_heads=4, initializer_range=0.2)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def hf_backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(tiny_model_dir, batch_size=8, device="cpu", progress=False)


def texts(samples: list[Completion]) -> list[str]:
    return [c.text for c in samples]


def reference_logprobs(backend: HFBackend, prompt: str, ids: list[int]) -> list[float]:
    """Teacher-forced log p(token) of ``ids`` after ``prompt`` under the raw model."""
    prompt_ids = backend.tokenizer(prompt)["input_ids"]
    seq = torch.tensor([prompt_ids + ids])
    with torch.no_grad():
        logp = torch.log_softmax(backend.model(seq).logits[0].float(), dim=-1)
    # Position p predicts token p + 1.
    start = len(prompt_ids) - 1
    return [logp[start + t, tid].item() for t, tid in enumerate(ids)]


# ---------------------------------------------------------------- SamplingParams / factory


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n", 0),
        ("n", 1.5),
        ("n", True),
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -1),
        ("max_new_tokens", 0),
        ("seed", -3),
        ("seed", "1"),
        ("stop", "###"),
        ("stop", [""]),
        ("logprobs", 1),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", -1.0),
        ("repetition_penalty", float("inf")),
        ("repetition_penalty", "1.2"),
    ],
)
def test_sampling_params_rejects_invalid_values(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"SamplingParams\.{field}="):
        SamplingParams(**{field: value})


def test_sampling_params_defaults_and_normalisation() -> None:
    params = SamplingParams(stop=("a", "b"))  # type: ignore[arg-type]
    assert params.stop == ["a", "b"]
    assert params.greedy and params.n == 1 and params.top_k == 0 and params.seed is None
    assert params.repetition_penalty == 1.0
    assert not SamplingParams(temperature=0.7).greedy


def test_get_backend_rejects_unknown_name() -> None:
    with pytest.raises(ConfigError, match="hf, vllm, openai"):
        get_backend("llamacpp", "some-model")


def test_get_backend_openai_needs_base_url() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        get_backend("openai", "some-model")


def test_import_does_not_load_heavy_packages() -> None:
    code = (
        "import sys, llmcore.generation\n"
        "heavy = {'torch', 'transformers', 'openai', 'vllm'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


# ---------------------------------------------------------------- HF backend


def test_hf_backend_is_a_generation_backend(hf_backend: HFBackend, tiny_model_dir: Path) -> None:
    assert isinstance(hf_backend, GenerationBackend)
    assert isinstance(
        get_backend("hf", hf_backend.model, tokenizer=hf_backend.tokenizer), HFBackend
    )
    assert str(tiny_model_dir) in repr(hf_backend)


def test_hf_sampling_gives_n_distinct_samples(hf_backend: HFBackend) -> None:
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8, seed=0)
    result = hf_backend.generate(PROMPTS, params)
    assert len(result) == len(PROMPTS)
    for i, samples in enumerate(result):
        assert [(c.prompt_index, c.sample_index) for c in samples] == [(i, j) for j in range(4)]
        assert len({tuple(c.token_ids) for c in samples}) == 4


def test_hf_greedy_gives_n_identical_samples(hf_backend: HFBackend) -> None:
    result = hf_backend.generate(PROMPTS, SamplingParams(n=3, max_new_tokens=8))
    for samples in result:
        assert len(samples) == 3
        assert len({tuple(c.token_ids) for c in samples}) == 1
        assert samples[0].finish_reason == "length" and len(samples[0].token_ids) == 8


def test_hf_seed_reproduces_and_leaves_global_rng_alone(hf_backend: HFBackend) -> None:
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=123)
    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    first = hf_backend.generate(PROMPTS, params)
    assert torch.equal(torch.rand(3), expected_next)
    second = hf_backend.generate(PROMPTS, params)
    other = hf_backend.generate(PROMPTS, dataclasses.replace(params, seed=124))
    assert first == second
    assert [texts(s) for s in first] != [texts(s) for s in other]


def test_hf_batched_left_padded_equals_unbatched_for_greedy(
    hf_backend: HFBackend, tiny_model_dir: Path
) -> None:
    params = SamplingParams(max_new_tokens=12, logprobs=True)
    lengths = {len(hf_backend.tokenizer(p)["input_ids"]) for p in PROMPTS}
    assert len(lengths) > 1  # the batch really is padded
    batched = hf_backend.generate(PROMPTS, params)
    single = HFBackend(
        hf_backend.model, hf_backend.tokenizer, batch_size=1, device="cpu", progress=False
    )
    unbatched = single.generate(PROMPTS, params)
    for b, u in zip(batched, unbatched, strict=True):
        assert b[0].token_ids == u[0].token_ids
        assert b[0].text == u[0].text
        assert b[0].logprobs == pytest.approx(u[0].logprobs, abs=1e-4)


def test_hf_stop_strings_truncate_text(hf_backend: HFBackend) -> None:
    prompt = PROMPTS[0]
    ref = hf_backend.generate([prompt], SamplingParams(max_new_tokens=24))[0][0]
    # The random model's text is mostly byte soup; stop on the 2nd ASCII letter it produced.
    letters = [i for i, ch in enumerate(ref.text) if ch.isascii() and ch.isalpha()]
    assert len(letters) >= 2, ref.text
    stop = ref.text[letters[1]]
    expected = ref.text[: ref.text.find(stop)]
    out = hf_backend.generate(
        [prompt], SamplingParams(max_new_tokens=24, stop=["<never>", stop], logprobs=True)
    )[0][0]
    assert out.text == expected
    assert out.finish_reason == "stop"
    # Tokens are kept up to the one that completed the stop string.
    assert out.token_ids == ref.token_ids[: len(out.token_ids)]
    assert stop in hf_backend.tokenizer.decode(out.token_ids)
    assert stop not in hf_backend.tokenizer.decode(out.token_ids[:-1])
    assert out.logprobs is not None and len(out.logprobs) == len(out.token_ids)


def test_hf_stop_strings_with_a_word_level_tokenizer() -> None:
    """transformers' StopStringCriteria rejects word-level vocabularies (it cannot map their
    tokens back to text); the backend falls back to decoding, and each row stops on its own."""
    from llmcore.zoo import ModelSpec, word_tokenizer
    from llmcore.zoo.train import build_model

    tok = word_tokenizer(list("abcdefgh;"))
    spec = ModelSpec(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    backend = HFBackend(build_model(spec, tok, seed=0), tok, progress=False)
    prompts = ["a b c", "h g"]
    refs = [c[0] for c in backend.generate(prompts, SamplingParams(max_new_tokens=16))]
    assert not backend._native_stop_strings()
    for prompt, ref in zip(prompts, refs, strict=True):
        words = ref.text.split()
        stops = [s for s in words if s != words[0]]
        assert stops, ref.text
        stop = stops[0]
        got = backend.generate([prompt], SamplingParams(max_new_tokens=16, stop=[stop]))[0][0]
        assert got.text == ref.text[: ref.text.find(stop)]
        assert got.finish_reason == "stop"
        assert got.token_ids == ref.token_ids[: len(got.token_ids)]
        assert len(got.token_ids) < len(ref.token_ids)
    # Batched: each row is cut at its own stop string, the other keeps going.
    stop = refs[0].text.split()[1] if refs[0].text.split()[1:] else refs[0].text.split()[0]
    both = backend.generate(prompts, SamplingParams(max_new_tokens=16, stop=[stop]))
    for ref, got in zip(refs, both, strict=True):
        cut = ref.text.find(stop)
        assert got[0].text == (ref.text[:cut] if cut >= 0 else ref.text)


def test_hf_generation_config_and_finish_reproduce_generate(hf_backend: HFBackend) -> None:
    """The public pair lets a caller run ``model.generate`` itself (e.g. on a cached prefix)
    and get what :meth:`HFBackend.generate` returns: same ids, text and finish reason."""
    prompt = PROMPTS[0]
    ref = hf_backend.generate([prompt], SamplingParams(max_new_tokens=24))[0][0]
    letters = [i for i, ch in enumerate(ref.text) if ch.isascii() and ch.isalpha()]
    for params in (
        SamplingParams(max_new_tokens=24),
        SamplingParams(max_new_tokens=24, stop=[ref.text[letters[1]]]),
    ):
        want = hf_backend.generate([prompt], params)[0][0]
        gc = hf_backend.generation_config(params)
        assert gc.do_sample is False and gc.max_new_tokens == 24
        enc = hf_backend.tokenizer([prompt], return_tensors="pt")
        extra = {"tokenizer": hf_backend.tokenizer} if params.stop else {}
        with torch.inference_mode():
            out = hf_backend.model.generate(**enc, generation_config=gc, **extra)
        new_ids = out.sequences[0, enc["input_ids"].shape[1] :].tolist()
        ids, text, reason = hf_backend.finish(new_ids, params)
        assert (ids, text, reason) == (want.token_ids, want.text, want.finish_reason)


def test_hf_repetition_penalty_reaches_generate(hf_backend: HFBackend) -> None:
    """The penalty is in the GenerationConfig, equals a hand-made config run, and changes
    greedy output on a prompt the tiny model would otherwise repeat from."""
    params = SamplingParams(max_new_tokens=24, repetition_penalty=3.0)
    gc = hf_backend.generation_config(params)
    assert gc.repetition_penalty == 3.0
    assert hf_backend.generation_config(SamplingParams()).repetition_penalty == 1.0
    prompt = "the cat sat on the mat and the cat sat on the mat and the cat"
    got = hf_backend.generate([prompt], params)[0][0]
    plain = hf_backend.generate([prompt], SamplingParams(max_new_tokens=24))[0][0]
    assert got.token_ids != plain.token_ids
    enc = hf_backend.tokenizer([prompt], return_tensors="pt")
    from transformers import GenerationConfig

    hand = GenerationConfig(
        max_new_tokens=24,
        do_sample=False,
        repetition_penalty=3.0,
        eos_token_id=sorted(hf_backend.eos_token_ids),
        pad_token_id=hf_backend.tokenizer.pad_token_id,
    )
    with torch.inference_mode():
        out = hf_backend.model.generate(**enc, generation_config=hand)
    new_ids = out[0, enc["input_ids"].shape[1] :].tolist()
    assert hf_backend.finish(new_ids, params)[0] == got.token_ids


def test_openai_request_kwargs_map_sampling_params() -> None:
    pytest.importorskip("openai")
    backend = OpenAIBackend("http://127.0.0.1:9/v1", "m", extra_body={"x": 1})
    base = backend.request_kwargs(SamplingParams(max_new_tokens=5), 1, None)
    assert base == {
        "model": "m",
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 5,
        "extra_body": {"x": 1},
    }
    params = SamplingParams(n=2, temperature=0.5, top_k=7, repetition_penalty=1.2, logprobs=True)
    kw = backend.request_kwargs(params, 2, 11)
    assert kw["extra_body"] == {"x": 1, "top_k": 7, "repetition_penalty": 1.2}
    assert (kw["n"], kw["seed"], kw["logprobs"]) == (2, 11, 1)
    assert backend.extra_body == {"x": 1}  # the per-request fields do not leak into it
    chat = OpenAIBackend("http://127.0.0.1:9/v1", "m", chat=True)
    assert "extra_body" not in chat.request_kwargs(SamplingParams(), 1, None)
    assert chat.request_kwargs(params, 2, None)["logprobs"] is True


def test_hf_logprobs_are_raw_model_logprobs(hf_backend: HFBackend) -> None:
    for params in (
        SamplingParams(max_new_tokens=10, logprobs=True),
        SamplingParams(n=2, temperature=2.0, top_k=5, max_new_tokens=10, seed=1, logprobs=True),
    ):
        for prompt, samples in zip(PROMPTS, hf_backend.generate(PROMPTS, params), strict=True):
            for c in samples:
                assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids) == 10
                ref = reference_logprobs(hf_backend, prompt, c.token_ids)
                assert c.logprobs == pytest.approx(ref, abs=1e-4)
    plain = hf_backend.generate(PROMPTS[:1], SamplingParams(max_new_tokens=4))
    assert plain[0][0].logprobs is None


def test_hf_eos_ends_sample_and_batch_rows_stay_aligned(tiny_model_dir: Path) -> None:
    backend = HFBackend(tiny_model_dir, batch_size=8, device="cpu", progress=False)
    params = SamplingParams(max_new_tokens=12, logprobs=True)
    ref = backend.generate(PROMPTS, params)
    # Declare the 4th greedy token of prompt 0 to be eos: generation must stop right there.
    ids0 = ref[0][0].token_ids
    eos = ids0[3]
    backend.model.generation_config.eos_token_id = eos
    stopped = backend.generate(PROMPTS, params)
    cut = ids0.index(eos) + 1
    assert stopped[0][0].token_ids == ids0[:cut]
    assert stopped[0][0].finish_reason == "stop"
    for r, s in zip(ref, stopped, strict=True):
        ids = r[0].token_ids
        expected = ids[: ids.index(eos) + 1] if eos in ids else ids
        assert s[0].token_ids == expected
        assert s[0].logprobs is not None and len(s[0].logprobs) == len(expected)
        assert s[0].finish_reason == ("stop" if eos in ids else "length")
    unbatched = HFBackend(backend.model, backend.tokenizer, batch_size=1, progress=False)
    alone = unbatched.generate(PROMPTS, params)
    assert [(a[0].token_ids, a[0].finish_reason) for a in alone] == [
        (s[0].token_ids, s[0].finish_reason) for s in stopped
    ]


def test_hf_pad_token_falls_back_to_eos(tiny_model_dir: Path, hf_backend: HFBackend) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.pad_token = None
    assert tok.pad_token_id is None
    backend = HFBackend(hf_backend.model, tok, device="cpu", progress=False)
    assert tok.pad_token_id == tok.eos_token_id
    out = backend.generate(PROMPTS, SamplingParams(max_new_tokens=6))
    ref = hf_backend.generate(PROMPTS, SamplingParams(max_new_tokens=6))
    assert [s[0].token_ids for s in out] == [s[0].token_ids for s in ref]


def test_hf_nonexistent_path_raises_model_load_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="no-such-model"):
        HFBackend(missing, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="empty"):
        HFBackend(str(empty), progress=False)


def test_hf_rejects_bad_input(hf_backend: HFBackend) -> None:
    with pytest.raises(ConfigError):
        hf_backend.generate("a single string", SamplingParams())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="empty"):
        hf_backend.generate(["ok", ""], SamplingParams(max_new_tokens=2))
    with pytest.raises(ConfigError, match="batch_size"):
        HFBackend(hf_backend.model, hf_backend.tokenizer, batch_size=0)
    assert hf_backend.generate([], SamplingParams()) == []


# ---------------------------------------------------------------- vLLM backend (no vllm here)


def test_vllm_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(MissingExtraError, match=r"icml26-llmcore\[vllm\]") as info:
        VLLMBackend("some-model")
    assert info.value.extra == "vllm"
    with pytest.raises(MissingExtraError):
        get_backend("vllm", "some-model")


def test_vllm_sampling_kwargs_mapping() -> None:
    params = SamplingParams(
        n=3, temperature=0.7, top_p=0.9, max_new_tokens=5, seed=4, stop=["\n"], logprobs=True
    )
    assert vllm_sampling_kwargs(params) == {
        "n": 3,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": -1,
        "max_tokens": 5,
        "seed": 4,
        "stop": ["\n"],
        "logprobs": 0,
        "repetition_penalty": 1.0,
    }
    assert vllm_sampling_kwargs(SamplingParams(top_k=40))["top_k"] == 40
    assert vllm_sampling_kwargs(SamplingParams(repetition_penalty=1.3))["repetition_penalty"] == 1.3
    assert vllm_sampling_kwargs(SamplingParams())["logprobs"] is None


def test_vllm_request_output_conversion() -> None:
    # Plain records shaped like vllm.RequestOutput / CompletionOutput / Logprob.
    def sample(index: int, ids: list[int], reason: str) -> SimpleNamespace:
        lps = [{t: SimpleNamespace(logprob=-0.5 * t)} for t in ids]
        return SimpleNamespace(
            index=index, text=f"s{index}", token_ids=ids, logprobs=lps, finish_reason=reason
        )

    out = SimpleNamespace(outputs=[sample(1, [3, 4], "length"), sample(0, [5], "stop")])
    params = SamplingParams(n=2, temperature=1.0, logprobs=True)
    got = completions_from_request_output(7, out, params)
    assert got == [
        Completion(7, 0, "s0", [5], [-2.5], "stop"),
        Completion(7, 1, "s1", [3, 4], [-1.5, -2.0], "length"),
    ]
    out.outputs[0].finish_reason = "abort"
    with pytest.raises(BackendError, match="abort"):
        completions_from_request_output(7, out, params)


# ---------------------------------------------------------------- OpenAI HTTP backend


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"\[openai\]") as info:
        OpenAIBackend("http://127.0.0.1:9/v1", "m")
    assert info.value.extra == "openai"


def test_openai_key_never_leaks(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("openai")
    secret = "sk-llmcore-test-0123456789abcdef"
    monkeypatch.setenv("LLMCORE_TEST_KEY", secret)
    url = f"http://127.0.0.1:{free_loopback_port()}/v1"  # nothing listens there
    backend = OpenAIBackend(url, "m", api_key_env="LLMCORE_TEST_KEY", max_retries=0, timeout=5)
    assert secret not in repr(backend) and secret not in str(backend)
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError) as info:
        backend.generate(["hello"], SamplingParams(max_new_tokens=2))
    message = str(info.value)
    assert url in message
    assert secret not in message
    assert secret not in caplog.text
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_openai_backend_validates_config() -> None:
    pytest.importorskip("openai")
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIBackend("127.0.0.1:8000", "m")
    with pytest.raises(ConfigError, match="concurrency"):
        OpenAIBackend("http://127.0.0.1:8000/v1", "m", concurrency=0)


@pytest.fixture(scope="module")
def served_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Run the real ``transformers serve`` on loopback with the tiny model preloaded.

    Yields the base URL. The server is terminated at teardown.
    """
    for module in ("openai", "fastapi", "uvicorn"):
        pytest.importorskip(module, reason="needs the 'serving' and 'openai' extras")
    port = free_loopback_port()
    home = tmp_path_factory.mktemp("hf-home")
    log_path = home / "serve.log"
    env = {
        **os.environ,
        "HF_HOME": str(home),  # keep the server's cache writes out of the user's home
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable,
        "-c",
        "import sys; from transformers.cli.transformers import main; sys.exit(main())",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        str(tiny_model_dir),
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        # A busy 2-core machine needs minutes to import the server.
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited early:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if json.load(r).get("status") == "ok":
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not healthy in 300 s:\n{log_path.read_text()}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.integration
def test_http_greedy_matches_in_process_hf(
    served_model: str, tiny_model_dir: Path, hf_backend: HFBackend
) -> None:
    # Fair comparison: the server tokenizes the raw prompt with the same tokenizer (no chat
    # template on /v1/completions; the zoo tokenizer adds no special tokens), decodes with
    # skip_special_tokens and stops at the same eos, all in float32 on CPU.
    backend = OpenAIBackend(served_model, str(tiny_model_dir), timeout=60)
    params = SamplingParams(n=2, max_new_tokens=12)
    remote = backend.generate(PROMPTS, params)
    local = hf_backend.generate(PROMPTS, params)
    for r, loc in zip(remote, local, strict=True):
        assert texts(r) == texts(loc)
        assert [c.finish_reason for c in r] == [c.finish_reason for c in loc]
        assert all(c.token_ids == [] and c.logprobs is None for c in r)
    # transformers serve keeps stop strings in its text; the client cuts them off.
    ref = local[0][0].text
    stop = next(ch for ch in ref[1:] if ch.isascii() and ch.isalpha())
    cut = backend.generate(PROMPTS[:1], SamplingParams(max_new_tokens=12, stop=[stop]))
    assert cut[0][0].text == ref[: ref.find(stop)]
    assert cut[0][0].finish_reason == "stop"


@pytest.mark.integration
def test_http_sampling_n_seed_and_errors(served_model: str, tiny_model_dir: Path) -> None:
    # transformers serve samples only if do_sample is on in the generation config (the API's
    # temperature alone does not switch it on) and ignores `n`; its `generation_config` request
    # field turns sampling on and top_k=0 switches off transformers' default top_k=50.
    sampling_cfg = json.dumps({"do_sample": True, "top_k": 0})
    backend = OpenAIBackend(
        served_model, str(tiny_model_dir), extra_body={"generation_config": sampling_cfg}
    )
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=11)
    first = backend.generate(PROMPTS[:2], params)
    for i, samples in enumerate(first):
        assert [(c.prompt_index, c.sample_index) for c in samples] == [(i, j) for j in range(3)]
        assert len(set(texts(samples))) == 3  # the backend topped up n with seeds 11, 12, 13
    assert backend.generate(PROMPTS[:2], params) == first

    chat = OpenAIBackend(served_model, str(tiny_model_dir), chat=True)
    assert len(chat.generate(PROMPTS[:1], SamplingParams(max_new_tokens=4))[0]) == 1

    with pytest.raises(BackendError, match="no logprobs"):
        backend.generate(PROMPTS[:1], SamplingParams(max_new_tokens=2, logprobs=True))
    with pytest.raises(BackendError, match="422"):  # top_k is not an OpenAI field
        backend.generate(PROMPTS[:1], SamplingParams(temperature=1.0, top_k=3))
