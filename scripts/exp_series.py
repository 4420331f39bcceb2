#!/usr/bin/env python3
"""Prints SIM_EXP_SERIES for sim/dev.h: the coefficients of Q, highest degree
first, in e^r = 1 + r + r^2 Q(r) on |r| <= ln 2 / 2 (the range sim_exp
reduces to), from mpmath's Chebyshev fit (Debian: python3-mpmath), and the
fit's error in e^r relative to e^r. Run: python3 scripts/exp_series.py"""
import mpmath as mp

mp.mp.dps = 50
DEGREE = 9
edge = mp.log(2) / 2 * mp.mpf('1.0001')  # a little past ln 2 / 2: rounding of k


def q(r):
    if abs(r) < mp.mpf('1e-20'):
        return mp.mpf(1) / 2 + r / 6
    return (mp.exp(r) - 1 - r) / r**2


poly, err = mp.chebyfit(q, [-edge, edge], DEGREE + 1, error=True)
print(', '.join(repr(float(c)) for c in poly) + ', 1.0, 1.0')
print('# relative error in e^r at most', mp.nstr(err * edge**2 / mp.exp(-edge), 3))
