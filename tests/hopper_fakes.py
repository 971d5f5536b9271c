"""Stand-ins for the CuPy arrays the Hopper launcher and heuristic read (shape, strides, item
size, pointer, row slices), and the picks the heuristic makes for them on a 132-SM device: no GPU
needed."""

from mgemm import hopper, hopper_heuristic


def row_major_flags(m, n, k):
    """``choose_config``'s row flags for row-major 16-bit A (m x k) and B (k x n) read in place."""
    return dict(b_rows_off=(n * 2) % 32 != 0, b_rows_off_128=(n * 2) % 128 != 0,
                a_rows_off_128=(k * 2) % 128 != 0, b_row_major=True)


class FakeMem:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeArray:
    """Just what ``hopper._operand`` looks at: shape, strides, itemsize, data.ptr, .T."""

    def __init__(self, shape, strides, itemsize=2, ptr=0x10000):
        self.shape, self.strides, self.itemsize, self.data = shape, strides, itemsize, FakeMem(ptr)
        self.dtype = "float16"

    @property
    def T(self):
        return FakeArray(self.shape[::-1], self.strides[::-1], self.itemsize, self.data.ptr)


class RowsArray(FakeArray):
    """A fake 2-D operand whose row slices are fake arrays that remember their rows."""

    def __init__(self, shape, strides, rows=None):
        super().__init__(shape, strides)
        self.ndim, self.rows = 2, rows if rows is not None else slice(0, shape[0])

    def __getitem__(self, rows):
        start, stop, _ = rows.indices(self.shape[0])
        return RowsArray((stop - start, self.shape[1]), self.strides, slice(start, stop))


def caller_way(m, n, k, dtype):
    """The heuristic's direct config on 132 SMs for an m x n x k product of row-major A, B and
    output, and what ``route`` does with it (``gemm_parts``'s way for a caller, beta == 0)."""
    a, b, out = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2)), FakeArray((m, n), (2 * n, 2))
    flags = hopper.rows_flags([a], [b])
    direct = hopper.choose_config(m, n, k, dtype, 132, **flags)
    return direct, hopper_heuristic.route([a], [b], out, direct, m, n, k, dtype, 132, flags)


def swap_pick(m, n, k, dtype, a_strides=None):
    """The heuristic's direct config on 132 SMs for an m x n x k product of a row-major B and
    output, A row-major (or on ``a_strides``) and, as row flags show them to ``gemm_parts``, what
    ``_swap_config`` answers for it."""
    a, b = FakeArray((m, k), a_strides or (2 * k, 2)), FakeArray((k, n), (2 * n, 2))
    direct = hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))
    return direct, hopper_heuristic._swap_config([a], [b], direct, FakeArray((m, n), (2 * n, 2)), m, n, k, dtype, 132, False)
