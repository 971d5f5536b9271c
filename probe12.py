import numpy as np, dask, dask.array as da, mgemm, warnings, itertools
warnings.simplefilter("ignore")
dask.config.set(scheduler="sync")
rng = np.random.default_rng(0)
a = rng.standard_normal((6, 5)); b = rng.standard_normal((5, 4))
cases = [
  (((3, 0, 3), (5,)), ((5,), (4,))),
  (((6,), (2, 0, 3)), ((5,), (4,))),
  (((6,), (5,)), ((2, 0, 3), (4,))),
  (((6,), (5,)), ((5,), (0, 4, 0))),
  (((0, 6), (0, 5)), ((5, 0), (2, 0, 2))),
  (((6,), (2, 0, 3)), ((3, 0, 2), (4,))),
]
for ca, cb in cases:
    for opts in [{}, {"block_size": 1}, {"block_size": 3}, {"split": "on"}]:
        A = da.from_array(a, chunks=ca); B = da.from_array(b, chunks=cb)
        try:
            r = mgemm.matmul(A, B, **opts)
            v = r.compute()
            ok = np.allclose(v, a @ b)
            chunk_ok = tuple(map(sum, r.chunks)) == (6, 4)
            vals = dask.compute(*r.to_delayed().ravel())
            shapes_ok = all(np.shape(x) == tuple(c[i] for c, i in zip(r.chunks, idx)) for x, idx in zip(vals, itertools.product(*(range(len(c)) for c in r.chunks))))
            if not (ok and chunk_ok and shapes_ok): print("BAD", ca, cb, opts, ok, chunk_ok, shapes_ok, r.chunks)
        except Exception as e:
            print("EXC", ca, cb, opts, type(e).__name__, e)
        try:
            r = mgemm.gemm(A, B, np.ones((6, 4)), alpha=2.0, beta=1.0, **opts).compute()
            if not np.allclose(r, 2 * a @ b + 1): print("BAD gemm", ca, cb, opts)
        except Exception as e:
            print("EXC gemm", ca, cb, opts, type(e).__name__, e)
print("done")
