#!/usr/bin/env python3
"""Prints the polynomial coefficients of sim/dev.h's e^x and sin/cos, highest
degree first, each a Chebyshev fit from mpmath (Debian: python3-mpmath) with
its worst error relative to the function:

  SIM_EXP_SERIES  e^r = 1 + r + r^2 Q(r), |r| <= ln 2 / 2 (sim_exp's range
                  after its reduction), Q of degree 9, then 1 and 1
  SIM_SIN_SERIES  sin a = a + a^3 S(a^2), a in [0, pi/4], S of degree 5
  SIM_COS_SERIES  cos a = 1 - a^2 (1/2 - a^2 C(a^2)), C of degree 5

Run: python3 scripts/sim_series.py"""
import mpmath as mp

mp.mp.dps = 50
TINY = mp.mpf('1e-30')
MARGIN = mp.mpf('1.0001')  # a little past each range's edge


def fit(name, f, lo, hi, degree, rel, tail=()):
    poly, err = mp.chebyfit(f, [lo, hi], degree + 1, error=True)
    print(f'#define {name} ' + ', '.join([repr(float(c)) for c in poly] + list(tail)))
    print(f'#   relative error at most {mp.nstr(rel(err), 3)}')


edge = mp.log(2) / 2 * MARGIN
fit('SIM_EXP_SERIES', lambda r: mp.mpf(1) / 2 if abs(r) < TINY else (mp.exp(r) - 1 - r) / r**2,
    -edge, edge, 9, lambda e: e * edge**2 / mp.exp(-edge), ('1.0', '1.0'))
a = mp.pi / 4
z = a**2 * MARGIN
fit('SIM_SIN_SERIES', lambda t: -mp.mpf(1) / 6 if t < TINY else (mp.sin(mp.sqrt(t)) - mp.sqrt(t)) / mp.sqrt(t)**3,
    0, z, 5, lambda e: e * a**3 / mp.sin(a))
fit('SIM_COS_SERIES', lambda t: mp.mpf(1) / 24 if t < TINY else (mp.cos(mp.sqrt(t)) - 1 + t / 2) / t**2,
    0, z, 5, lambda e: e * a**4 / mp.cos(a))
