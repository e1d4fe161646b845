"""The coefficients of `exp_nonpositive` in src/cpu/math.rs.

exp(r) ~ 1 + r + r^2 * P(r) on [-ln2/2, ln2/2] (the range left after taking out
2^n), P of degree 3, fit for the smallest largest relative error of exp(r) by
Lawson's iteration (reweighted least squares, which converges to the minimax fit).
Prints the coefficients c0..c3 of P, the error in exact arithmetic, and the error
of the polynomial evaluated in float32 as the kernel does (Horner, then r*r*P + r + 1).

Run: python3 -m venv /tmp/np && /tmp/np/bin/pip install numpy && /tmp/np/bin/python
models/scripts/fit_exp_poly.py
"""

import numpy as np

HALF_LN2 = np.log(2) / 2

x = np.cos(np.linspace(0, np.pi, 4001)) * HALF_LN2
x = x[np.abs(x) > 1e-6]
target = (np.exp(x) - 1 - x) / x**2
basis = np.vander(x, 4, increasing=True)
# The relative error of exp(r) is r^2 (P(r) - target) / exp(r).
to_relative = x**2 / np.exp(x)
weights = np.ones_like(x)
for _ in range(200):
    w = np.sqrt(weights) * to_relative
    coef, *_ = np.linalg.lstsq(basis * w[:, None], target * w, rcond=None)
    err = np.abs((basis @ coef - target) * to_relative)
    weights = weights * err / err.mean()
print("P:", [f"{c:.8e}" for c in coef], "largest relative error", err.max())

c32 = [np.float32(c) for c in coef]
r = np.linspace(-HALF_LN2, HALF_LN2, 200001).astype(np.float32)
p = c32[3]
for k in (2, 1, 0):
    p = (p * r + c32[k]).astype(np.float32)
e = ((p * r).astype(np.float32) * r + r).astype(np.float32) + np.float32(1)
exact = np.exp(r.astype(np.float64))
print("evaluated in float32:", np.max(np.abs((e - exact) / exact)))
