#!/usr/bin/python3
"""loom's SplitMix64 (data/splitmix.h) in Python, for the reference trainers that repeat loom's
shuffles (bench/reference/train.py bert, bench/reference/train.py translation):

    from splitmix import SplitMix64, mix_seeds, random_permutation
"""

M64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self, n):
        """Uniform in [0, n) without modulo bias (draws below 2^64 mod n are rejected)."""
        threshold = ((1 << 64) - n) % n
        while True:
            r = self.next()
            if r >= threshold:
                return r % n

    def uniform01(self):
        return (self.next() >> 11) * 2.0 ** -53


def mix_seeds(a, b):
    return SplitMix64(a ^ SplitMix64(b).next()).next()


def random_permutation(n, seed):
    """0..n-1 in a seeded order (Fisher-Yates from the top, as data::random_permutation)."""
    perm, g = list(range(n)), SplitMix64(seed)
    for i in range(n - 1, 0, -1):
        j = g.uniform(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm
