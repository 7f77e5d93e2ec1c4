"""C backend and evaluator lattice: gcc errors with line numbers (FAIL), an off-by-one kernel
(COMPILE with the failing seed and max abs diff), FAST through an injected timer; the real
blocked-vs-naive speedup is a ``perf`` test."""

from __future__ import annotations

import pytest
from cuda_analyst.backends import Timing
from cuda_analyst.candidates import candidate
from cuda_analyst.evaluator import Evaluator
from cuda_analyst.tasks import get_task


def test_syntax_error_is_fail_with_gcc_line_numbers(cbackend):
    r = Evaluator(get_task("matmul"), cbackend).evaluate(candidate("matmul", "fail"))
    assert r.status == "FAIL" and r.error["stage"] == "build"
    assert "cand.c:2:" in r.compile_log and "error" in r.compile_log
    from cuda_analyst.backends import compiler_messages

    assert compiler_messages(r.compile_log)[0]["line"] == 2


def test_off_by_one_is_compile_with_failing_seed(cbackend):
    r = Evaluator(get_task("matmul"), cbackend).evaluate(candidate("matmul", "wrong"))
    assert r.status == "COMPILE" and r.error["reason"] == "Mismatch output, implementation error"
    assert r.check["failing_seed"] == 0 and r.check["max_abs"] > 0.1


def test_fast_through_injected_timer(cbackend):
    def timer(artifact, task):
        return Timing(
            cand_min=1.0e6, cand_median=1.1e6, base_min=2.0e6, base_median=2.1e6, repeat=15
        )

    ev = Evaluator(get_task("matmul"), cbackend, timer=timer)
    r = ev.evaluate(candidate("matmul", "fast"))
    assert r.status == "FAST" and r.combined_score == pytest.approx(2.0)
    slow = Evaluator(
        get_task("matmul"), cbackend, timer=lambda a, t: Timing(1.0e6, 1e6, 1.1e6, 1.1e6, repeat=15)
    )
    assert slow.evaluate(candidate("matmul", "fast")).status == "PASS"  # 1.10 <= 1 + 0.12
    cheat = Evaluator(
        get_task("matmul"), cbackend, timer=lambda a, t: Timing(1.0e5, 1e5, 2.0e6, 2e6, repeat=15)
    )
    r = cheat.evaluate(candidate("matmul", "fast"))
    assert r.status == "PASS" and "exceeds" in r.suspicious  # > 10x is never FAST


def test_forbidden_call_and_codeless_reply(cbackend):
    ev = Evaluator(get_task("matmul"), cbackend)
    r = ev.evaluate(
        "#include <cblas.h>\nvoid kernel(const float* a, const float* b, float* c, int n) { cblas_sgemm(); }"
    )
    assert r.status == "FAIL" and "Forbidden" in r.error["reason"]
    assert ev.evaluate(None).status == "FAIL"


def test_cache_hits_by_source(cbackend):
    from cuda_analyst.evaluator import EvalCache

    cache = EvalCache()
    ev = Evaluator(get_task("reduce_sum"), cbackend, cache=cache)
    a = ev.evaluate(candidate("reduce_sum", "wrong"))
    b = ev.evaluate(candidate("reduce_sum", "wrong"))
    assert not a.cached and b.cached and a.status == b.status == "COMPILE"


@pytest.mark.perf
def test_blocked_matmul_beats_naive_256(cbackend):
    r = Evaluator(get_task("matmul"), cbackend).evaluate(candidate("matmul", "fast"))
    assert r.status == "FAST" and r.combined_score > 1.12, r.timing


def test_threads_share_an_evaluator_safely(cbackend):
    """Two worker threads on one evaluator (as in ``intervene``): distinct and identical sources
    in flight together; no thread removes another's sandbox directory."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_analyst.evaluator import EvalCache, Evaluator
    from cuda_analyst.tasks import get_task

    task = get_task("vector_add")
    ev = Evaluator(task, cbackend, cache=EvalCache())
    srcs = [task.baseline_src + f"/* thread variant {k % 3} */\n" for k in range(6)]
    with ThreadPoolExecutor(2) as pool:
        res = list(pool.map(ev.evaluate, srcs))
    assert all(r.check.get("ok") for r in res), [r.error for r in res]
    assert sum(r.cached for r in res) == 3 and ev.cache.misses == 3
