"""The "persistent" engine: block GEMM with mgemm's own persistent kernels (kernels/, via CuPy).

On a Hopper GPU (sm_90) float16, bfloat16 and, with ``allow_tf32``, float32 go to the
warp-specialized wgmma kernel (``mgemm.hopper``), a block's K parts (up to ``MAX_K_PARTS`` per
launch) in one launch that adds them up in its accumulators (``hopper.gemm_parts``); everything
else, and every other GPU, to the portable kernel (``mgemm.kernels``), whose K parts accumulate in
place.  The first launch takes the caller's beta and c, every later one beta = 1 on the output
(a float32 one for a 16-bit result, rounded once after the last launch).
Float32 goes to the exact SIMT mainloop unless ``allow_tf32``.  ``tune``: the Hopper kernel's
launches take the config ``mgemm.tune`` timed fastest for their kind of product.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import (accumulator_dtype, cuda_device_count, is_bfloat16, launch_groups,
               persistent_multiplies, wait_for_queued_work)


class PersistentEngine:
    name = "persistent"

    @staticmethod
    def available() -> bool:
        return cuda_device_count() > 0

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], *, alpha: float = 1.0,
             beta: float = 0.0, c: Any = None, out_dtype: Any = None,
             allow_tf32: bool = False, tune: bool = False) -> Any:
        import cupy

        from mgemm import kernels

        m, n = a_parts[0].shape[0], b_parts[0].shape[1]
        in_dtype = a_parts[0].dtype
        if any(x.dtype != in_dtype for x in (*a_parts, *b_parts)):
            try:
                in_dtype = cupy.result_type(*a_parts, *b_parts)
            except TypeError:  # bfloat16 with float16: no common 16-bit type; both embed in float32
                in_dtype = cupy.dtype(cupy.float32)
        if not persistent_multiplies(in_dtype):
            raise TypeError(f"engine 'persistent' multiplies float16/32/64 and bfloat16, not {in_dtype}")
        dtype = cupy.dtype(out_dtype) if out_dtype is not None else in_dtype
        parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
        if not parts:  # K = 0: alpha * 0 + beta * c
            out = cupy.empty((m, n), dtype=dtype)
            kernels.gemm(cupy.empty((m, 0), in_dtype), cupy.empty((0, n), in_dtype),
                         _as(c, dtype, beta), alpha=alpha, beta=beta, out=out)
            wait_for_queued_work(cupy)
            return out
        parts = [(a if a.dtype == in_dtype else a.astype(in_dtype),
                  b if b.dtype == in_dtype else b.astype(in_dtype)) for a, b in parts]
        if _use_hopper(in_dtype, dtype, allow_tf32):
            from mgemm import hopper, hopper_config
            # up to MAX_K_PARTS parts per launch, added up in the kernel's accumulators
            step = hopper_config.MAX_K_PARTS
            groups = [parts[i:i + step] for i in range(0, len(parts), step)]
            launch = lambda group, **kw: hopper.gemm_parts(*zip(*group), tune=tune, **kw)  # noqa: E731
        else:
            groups = [[p] for p in parts]
            launch = lambda group, **kw: kernels.gemm(*group[0], **kw)  # noqa: E731
        # Launches after the first add into what the earlier ones wrote: a 16-bit result is
        # added up in float32 then and rounded once (every kernel writes float32 from any input)
        acc_dtype = dtype if len(groups) == 1 else cupy.dtype(accumulator_dtype(dtype))
        out = cupy.empty((m, n), dtype=acc_dtype)
        launch_groups(launch, groups, c=_as(c, acc_dtype, beta), alpha=alpha, beta=beta, out=out,
                      allow_tf32=allow_tf32)
        if acc_dtype != dtype:
            out = out.astype(dtype)
        wait_for_queued_work(cupy)
        return out


def _as(c: Any, dtype: Any, beta: float) -> Any:
    """``c`` as the kernels read it: in the type they write (and not at all when beta == 0)."""
    return c.astype(dtype, copy=False) if c is not None and beta != 0 else c


def _use_hopper(in_dtype, out_dtype, allow_tf32: bool) -> bool:
    """Whether the Hopper kernel takes this product: an sm_90 GPU, float16 in and float16 or
    float32 out, bfloat16 in and bfloat16 or float32 out, or float32 with ``allow_tf32`` (tf32
    tensor cores)."""
    from mgemm import hopper
    if in_dtype.char == "e":
        ok = out_dtype.char in "ef"
    elif is_bfloat16(in_dtype):
        ok = is_bfloat16(out_dtype) or out_dtype.char == "f"
    else:
        ok = in_dtype.char == "f" and allow_tf32 and out_dtype.char == "f"
    return ok and hopper.supported()
