"""Exact learners whose EDL is known in closed form (for checking the accounting).

Each learner codes labels prequentially with its predictive distribution after i examples;
``edl(n, rng)`` is the realised EDL_A(D) = sum_i l_i - n L(theta_n) on one sampled data set and
``expected_edl(n, seeds)`` the variance-free form sum_i L(theta_{i-1}) - n L(theta_n) (averaged
over ``seeds`` data sets when the learner's test loss depends on the data).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


def _log2(p: float) -> float:
    return math.log2(p)


@dataclass
class IdentityLearner:
    """theta_i = theta_0 (the ``prompt`` control): EDL = 0 exactly when T = D."""

    K: int = 4

    def edl(self, n: int, rng: random.Random) -> float:
        ys = [rng.randrange(self.K) for _ in range(n)]
        code = -math.fsum(_log2(1 / self.K) for _ in ys)
        test = -_log2(1 / self.K)  # T = D: the same per-example loss
        return code - n * test

    def expected_edl(self, n: int, seeds: int = 1) -> float:
        return 0.0 * n


@dataclass
class KTBernoulli:
    """Krichevsky-Trofimov estimator p_hat = (k + 1/2) / (i + 1) on Bernoulli(p) labels.

    Expected EDL grows like (1/2) log2 n (the regret of one parameter)."""

    p: float = 0.3

    def _loss(self, q: float) -> float:
        p = self.p
        return -(p * _log2(q) + (1 - p) * _log2(1 - q))

    def edl(self, n: int, rng: random.Random) -> float:
        k, code = 0, 0.0
        for i in range(n):
            q = (k + 0.5) / (i + 1)
            y = rng.random() < self.p
            code -= _log2(q if y else 1 - q)
            k += y
        return code - n * self._loss((k + 0.5) / (n + 1))

    def expected_edl(self, n: int, seeds: int = 1000) -> float:
        tot = 0.0
        for s in range(seeds):
            rng = random.Random(s)
            k, acc = 0, 0.0
            for i in range(n):
                acc += self._loss((k + 0.5) / (i + 1))
                k += rng.random() < self.p
            tot += acc - n * self._loss((k + 0.5) / (n + 1))
        return tot / seeds


@dataclass
class DirichletCategorical:
    """Dirichlet(alpha) posterior predictive over K labels, ignoring x (random labels: EDL/n -> 0).

    Labels are uniform over K, so the test loss of a predictive q is -(1/K) sum_c log2 q_c."""

    K: int = 10
    alpha: float = 1.0

    def _loss(self, counts: list[int], i: int) -> float:
        den = i + self.K * self.alpha
        return -math.fsum(_log2((c + self.alpha) / den) for c in counts) / self.K

    def edl(self, n: int, rng: random.Random) -> float:
        counts = [0] * self.K
        code = 0.0
        for i in range(n):
            y = rng.randrange(self.K)
            code -= _log2((counts[y] + self.alpha) / (i + self.K * self.alpha))
            counts[y] += 1
        return code - n * self._loss(counts, n)

    def expected_edl(self, n: int, seeds: int = 100) -> float:
        tot = 0.0
        for s in range(seeds):
            rng = random.Random(s)
            counts = [0] * self.K
            acc = 0.0
            for i in range(n):
                acc += self._loss(counts, i)
                counts[rng.randrange(self.K)] += 1
            tot += acc - n * self._loss(counts, n)
        return tot / seeds


@dataclass
class SecretXorRule:
    """Bayes over the 2^k keys s of the rule y = x XOR s (k-bit strings, uniform prior).

    The posterior predictive of y given x is the share of consistent keys mapping x to y; the
    first example leaves one key, so EDL = k bits exactly for every n >= 1."""

    k: int = 8

    def _run(self, n: int, rng: random.Random) -> tuple[float, float, list[float]]:
        s = rng.randrange(2**self.k)
        keys = list(range(2**self.k))
        code, expected = 0.0, []
        for _ in range(n):
            # every consistent key maps x to a distinct y: the expected loss is log2 |keys|
            expected.append(math.log2(len(keys)))
            x = rng.randrange(2**self.k)
            y = x ^ s
            p = sum(1 for c in keys if x ^ c == y) / len(keys)
            code -= _log2(p)
            keys = [c for c in keys if x ^ c == y]
        return code, math.log2(len(keys)), expected

    def edl(self, n: int, rng: random.Random) -> float:
        code, final, _ = self._run(n, rng)
        return code - n * final

    def expected_edl(self, n: int, seeds: int = 1) -> float:
        tot = 0.0
        for s in range(seeds):
            _, final, exp = self._run(n, random.Random(s))
            tot += math.fsum(exp) - n * final
        return tot / seeds
