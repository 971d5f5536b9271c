"""mgemm.timeline on made-up entries (pure NumPy; the GPU test of the kernel's own entries is in
tests/test_hopper.py)."""

import numpy as np
import pytest

from mgemm import timeline


def entries():
    # CTA 0 (both warpgroups): start 0, units of tile 0 [0, 4) and tile 2 [0, 4), exit at 100.
    # CTA 1: starts at 10, one unit of tile 1 [0, 4), leaves at 60.  The last two fields (partial
    # stored, partials visible) are 0 but on tile 0's unit, as if it were split and reduced; in the
    # exit entries they say when the warpgroup waited for its first unit and the producer posted it.
    rows = []
    for wg in (0, 1):
        rows += [[0, wg, 0, 0, 4, 5, 25, 30, 27, 28], [0, wg, 2, 0, 4, 35, 55, 60, 0, 0],
                 [0, wg, -1, 0, 0, 0, 62, 100, 1, 3], [1, wg, 1, 0, 4, 12, 32, 40, 0, 0],
                 [1, wg, -1, 0, 0, 10, 45, 60, 11, 14]]
    return np.array(rows, dtype=np.int64)


def test_entries_are_as_wide_as_the_kernels():
    from mgemm.kernels import KERNEL_DIR
    assert entries().shape[1] == len(timeline.FIELDS)
    src = (KERNEL_DIR / "gemm_hopper.cu").read_text()
    assert f"static constexpr int kFields = {len(timeline.FIELDS)};" in src


def test_units_in_the_order_taken():
    e = entries()
    assert timeline.units(e[::-1]) == {0: [(0, 0, 4), (2, 0, 4)], 1: [(1, 0, 4)]}
    assert timeline.units(e, wg=1) == timeline.units(e)


def test_units_of_pingpong_warpgroups_merged_in_the_order_taken():
    """Pingpong: each warpgroup takes every other unit; ``wg=None`` gives the CTA's units in the
    order taken, whichever warpgroup took them."""
    f = len(timeline.FIELDS)
    rows = [(0, 0, 5, 0, 4, 1, 21, 26, 0, 0), (0, 1, 7, 0, 4, 22, 42, 47, 0, 0),
            (0, 0, 9, 0, 4, 43, 63, 68, 0, 0),
            (0, 0, -1, 0, 0, 0, 70, 72, 1, 1), (0, 1, -1, 0, 0, 0, 70, 73, 1, 1)]
    e = np.array(rows[::-1], np.int64).reshape(-1, f)
    assert timeline.units(e, wg=None) == {0: [(5, 0, 4), (7, 0, 4), (9, 0, 4)]}
    assert timeline.units(e) == {0: [(5, 0, 4), (9, 0, 4)]} and timeline.units(e, wg=1) == {0: [(7, 0, 4)]}
    assert timeline.check(e) == []
    # a CTA of one unit: its second warpgroup runs none and is idle from start to exit
    one = np.array([(0, 0, 5, 0, 4, 2, 22, 24, 0, 0), (0, 0, -1, 0, 0, 0, 25, 30, 1, 1),
                    (0, 1, -1, 0, 0, 0, 18, 29, 1, 1)], np.int64)
    assert timeline.check(one) == []
    s = timeline.summarize(one)
    assert (s["setup"], s["mainloop"], s["after mainloop"], s["between units"], s["tail"]) == \
        pytest.approx((2e-3, 20e-3, 2e-3, 1e-3, 5e-3))
    assert s["idle"] == pytest.approx(30e-3)  # the second warpgroup's whole span
    assert sum(s[p] for p in timeline.PHASES) == pytest.approx(2 * s["span"])


def test_summary_phases_add_up_to_warpgroups_times_span():
    s = timeline.summarize(entries())
    assert s["span"] == pytest.approx(0.100)  # 0 .. 100 ns
    assert s["warpgroups"] == 4 and s["units"] == 6
    assert sum(s[p] for p in timeline.PHASES) == pytest.approx(4 * s["span"])
    # per warpgroup of CTA 0: setup 5, mainloop 20 + 20, after 5 + 5, between 5 + 2, tail 38
    # CTA 1: setup 2, mainloop 20, after 8, between 5, tail 15, idle 10 + 40
    assert s["setup"] == pytest.approx(2 * (5 + 2) * 1e-3)
    assert s["mainloop"] == pytest.approx(2 * 60 * 1e-3)
    assert s["after mainloop"] == pytest.approx(2 * 18 * 1e-3)
    assert s["between units"] == pytest.approx(2 * 12 * 1e-3)
    assert s["tail"] == pytest.approx(2 * 53 * 1e-3)
    assert s["idle"] == pytest.approx(2 * 50 * 1e-3)
    assert s["start spread"] == pytest.approx(0.010) and s["exit spread"] == pytest.approx(0.040)
    assert s["mainloop per k-iteration (median)"] == pytest.approx(0.005)
    assert s["after mainloop (max)"] == pytest.approx(0.008)
    assert s["waiting for unit 0 from (median)"] == pytest.approx(0.001)
    assert s["unit 0 posted at (median)"] == pytest.approx(0.0035)  # 3 and 4 ns after the starts
    line = timeline.format_summary(s)
    assert line.startswith("span 0.1 us over 4 warpgroups") and "mainloop 30%" in line


def test_check_finds_what_is_inconsistent():
    assert timeline.check(entries()) == []
    e = entries()
    e[0, 6] = 2  # mainloop ends before the unit was taken
    assert any("take <= mainloop end" in p for p in timeline.check(e))
    e = entries()
    e = e[~((e[:, 0] == 1) & (e[:, 1] == 0) & (e[:, 2] < 0))]  # a warpgroup that never left
    assert timeline.check(e) == ["CTA 1 warpgroup 0: units but no exit entry"]
    e = entries()
    e[1, 7] = 200  # done after its warpgroup left
    assert any("outside" in p for p in timeline.check(e))
    e = np.vstack([entries(), entries()[2]])
    assert any("two exit entries" in p for p in timeline.check(e))
    e = entries()
    e[0, 8] = 35  # partial stored after the unit was done
    assert any("partial stored" in p for p in timeline.check(e))
    e = entries()
    e[0, 9] = 20  # the tile's partials visible before this unit's own mainloop ended
    assert any("visible before" in p for p in timeline.check(e))


def test_summary_needs_exit_entries():
    with pytest.raises(ValueError, match="no exit entries"):
        timeline.summarize(entries()[[0, 1]])
