"""Which Hopper kernel config a product gets: ``choose_config`` and the rules it applies in turn,
and ``route``, the order in which ``mgemm.hopper.gemm_parts`` weighs a K-major copy of B, the
tail split over two launches and the transposed product B^T A^T.  Pure and deterministic (no
CuPy), so CPU tests check every pick; each tuning constant names what it was measured against
(benchmarks/RESULTS.md).

How the heuristic grew (H200, 2026-11-30; numbers in benchmarks/RESULTS.md).  Verified on the GPU:
every GPU test in tests/test_hopper.py (108 in the third session, incl. every operand layout without
a copy, the ``pair`` epilogue against ``direct``, stream-K bitwise reproducible, the debug record
equal to the Python mirror; the 2-CTA cluster, pingpong and 24 / 240 register tests), and in the
fourth, with the staged epilogue as the heuristic's default, the 113 that do not use clusters,
pingpong or the register split, the staged epilogue's own among them.  Speed against cuBLAS in the
same process, the two timed in turns: bf16 and fp16 0.97–1.00 at 8192³, 0.96 at 4096³; over the six
skewed shapes a geometric mean of 0.70–0.71 in the fourth session, 0.64–0.76 in the fifth, where two
heuristic changes were measured and GPU-tested: the spread stream-K fix-up for tiles split four or
more ways (256x256x65536: 0.49–0.66 against 0.35–0.44 with the owner adding its ~33 partials alone)
and the 128-wide tile where the 256-wide tiles do not fill a wave or K is short (ahead of the wide
tile on all six, geomean 0.69 / 0.74 against 0.64 / 0.67 in one run); tf32 0.99 with B column-major,
0.86 with B row-major (copied every call).  2-CTA clusters are level with one CTA per tile where B's
rows lie on 128-byte lines and well ahead where they do not (the heuristic takes them there:
``OFF_ROWS_CLUSTERS``); 24 / 240 is correct but slower than the cooperative default here; so are
pingpong consumers, except on thin products (at most 64 rows or columns), where the heuristic takes
pingpong 64 × 64 tiles (``THIN_TILE``): ahead of the 128 × 128 tile on all seven thin shapes
measured, in both dtypes (64x8192x8192: 0.93–0.99 of cuBLAS against 0.74–0.75), and the six skewed
shapes' geomean 0.85 / 0.86 (bf16 / fp16) with it (eleventh session).  The same config on the same
shape read up to 2x apart between runs (cuBLAS did not): the events counted the GPU waiting for this
module's host path (75–180 µs a call on the H200 host then, against 30–90 µs for ``cupy.matmul``;
the launch itself 13 µs), which outlasts the benchmark's L2 flush.  (Since the twenty-first session
descriptors are encoded and the kernel launched through ctypes on the driver library, and a launch's
setup is memoized: 50–85 µs with operands at new addresses every call.)  Timed as GPU time
(thirteenth session) the ratios are steady: bf16 / fp16 0.97 / 0.97 at 8192³, 0.97 / 0.96 at 4096³,
the skewed geomean 0.90 / 0.90, with the TMA-store epilogue for K <= 2048 and 4 stages for K <= 256
(8192x8192x256: 0.97–0.98 against 0.84–0.85 with the staged epilogue on 6 stages) and a spread
fix-up that loads eight contributors' partials at a time over a whole number of CTAs per tile
(512x512x32768: 0.78 against 0.58; 256x256x65536: 0.76–0.77 against 0.68).  In the sixteenth session
128x192 tiles (``MID_TILE``) where the 128-wide stream-K tiles run just past a wave took the skewed
geomean to 0.92 / 0.92 (1024x2112x8192: 0.88–0.90 against 0.73–0.82), and the whole GPU suite passed
(420 tests, pytest-xdist on one H200).  In the seventeenth session the spread fix-up's code shrank
from 4613 to 720 SASS instructions (it runs once per launch, on instruction caches the L2 flush and
the previous kernel left cold): 256x256x65536 0.79-0.81 against 0.77, the skewed geomean 0.92 /
0.93; one wave of 128x192 tiles replaced stream-K over 1.15 or more waves of 128-wide ones
(``ONE_WAVE_FROM``; +0.05-0.29 on seven shapes drawn after the rule); a partial wave at least half
full runs static instead of stream-K (``fit_policy``; +0.05-0.23 on eleven of twelve new shapes);
and one wave of 256-wide tiles filled 0.9 or more replaced two of 128-wide ones (``WIDE_WAVE_FILL``;
ahead on all eight new shapes).  In the eighteenth session tiles 96, 160 and 224 wide joined (wgmma
n96 / n160 / n224; a row-major B loads whole 64-wide boxes; the staged epilogue rotates rows that
are not whole 128-byte boxes, so no TMA stores there; the whole GPU suite, 480 tests, passed), and
one or two static waves of 128x224 tiles filled to 0.9 or more replace the heuristic's tile where
that splits or fills its waves less (``FILL_WIDTHS``; ahead in 73 of 78 runs on shapes drawn after
the rule, by up to 0.22; behind by up to 0.07), and up to four fuller waves of 128x192 replace
static waves of 128x128 (``FILL_FROM_128``; ahead in all 36 runs on eighteen shapes drawn after the
rule, by 0.01-0.17); that rule (``_fill_waves``) went in the sixtieth session, when it changed no
launch left to ``_cheapest_waves`` over 180,000 picks drawn on the CPU.  In the nineteenth session
the heuristic priced a wave (``WAVE_COST``) and stream-K (``SK_OVERHEAD``) from every static width
timed on 48 random shapes: the cheapest static waves replace stream-K or dearer static waves
(``_cheapest_waves``; ahead in 65 of 66 runs on shapes drawn after the rule), fewer tiles than half
the SMs run unsplit unless K is long (``FEW_TILES_SK``; 32 of 34), and skinny products with few
tiles take the thin tile (32 of 32); 24 unfiltered random shapes went from 0.84 to 0.88 of cuBLAS
(geomean) and the whole GPU suite passed again.  In the twentieth session every product with few
tiles and K up to 4096 took the thin tile (``FEW_TILES_THIN``; ahead in 52 of 52 runs on shapes
drawn after the rule, geomean 0.64 -> 0.79), and the operand copies got rows on 128-byte boundaries:
TMA reads rows off them slowly (0.63-0.70 of cuBLAS where padded rows reach 0.88-0.99; operands read
in place still pay this, see ``_operand``), and where B's rows are off 32-byte sectors static
128x128 tiles give way to 128x192 (``OFF_ROWS_WIDTH``; 26 of 28 runs ahead).  In the thirty-first
session stream-K learned to run over 2 x 2 clusters (the blocks of tiles split over the clusters,
A and B multicast: 257 -> 157 MB through the L2 on 256x256x65536), and 128 x 128 launches below
0.75 of a wave take it (``QUAD_SK``; ahead in 33 of 36 runs on shapes drawn after the rule;
256x256x65536 0.77 -> 0.90).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from mgemm import schedule
from mgemm.hopper_config import (SPLIT_N_TILE_M, TILE_M, TILE_NS, WIDE_TILE_NS, HopperConfig, _blocks,
                                 input_kind)
from mgemm.kernels import split_tail


# Tiles the heuristic chooses among, (tile_n, stages), largest first; all run one CTA per SM.
# The CI compile script (.ci/compile-kernels.sh) builds these.
TILE_CHOICES = [(256, 4), (128, 6)]
# The 256-wide tile competes only where its tiles fill at least this share of one wave (below
# that, 128; one wave of 256-wide tiles filled 0.90-0.98 ran static ahead of 128; choose_config)
WIDE_WAVE_FILL = 0.9
# Products of at most 64 rows or columns: pingpong consumers on 64 x 64 tiles, 12 stages (no rows of
# A or columns of B loaded and multiplied as zeros, and more tiles to share out; see choose_config).
THIN_TILE = (64, 64, 12)  # (tile_m, tile_n, stages)
# 16-bit thin products whose THIN_TILE tiles are more than one wave: the tile twice as long along
# the long side (64 x 128 where M is thin, 128 x 64 where N is), on THIN_LONG[1] stages, where it
# runs static or K has at least THIN_LONG[2] 64-wide steps; None: off (see choose_config)
THIN_LONG = (128, 8, 16)
# ... and thin-M products (fewer than 64 rows) whose THIN_TILE tiles run static in one wave more
# than half full: THIN_LONG's tiles split-K this many ways (as many CTAs); None: off (choose_config)
THIN_LONG_SPLIT = 2
# 16-bit products whose 128x128 tiles fill at most FEW_TILES_THIN[0] of the SMs, K of at most
# FEW_TILES_THIN[1] 64-wide steps: THIN_TILE too, with the same policy where that is unsplit; where
# it splits (stream-K), with the thin tile's own policy if FEW_TILES_THIN[2] and the thin tiles are
# too many for stream-K to split each eight or more ways (see choose_config)
FEW_TILES_THIN = (0.25, 64, True)
SHORT_K = 4  # K of at most this many 64-wide steps is short (see choose_config; 8 until the 42nd session)
TMA_STORE_K = 32  # the TMA-store epilogue for K of at most this many 64-wide steps (choose_config)
# Where gemm_parts picks 16-bit 128 x 256 tiles on 4 stages under TMA stores, one CTA a cluster:
# (stages, out_buffers) instead, two staging buffers a warpgroup so that its row's second chunk need
# not wait for the first chunk's stores to read theirs (``tma_buffers``; None: as picked)
TMA_BUFFERS: tuple[int, int] | None = (3, 2)
# ... only where the tiles run past one wave of the SMs (a CTA then has a next tile, whose loads the
# second buffer lets start sooner); in one wave each CTA's one mainloop keeps its fourth stage
# (``tma_buffers``; H100, on eight sizes drawn: geomean fp16 0.914 -> 0.922, bf16 0.908 -> 0.926,
# RESULTS.md, seventy-fifth session).  False: in one wave too
TMA_BUFFERS_PAST_WAVE = True
# 256-wide tiles over at least MANY_WAVES[0] waves of the SMs (on clusters: waves of their blocks
# over the clusters one wave holds), K of at least MANY_WAVES[1] 64-wide steps, the last wave partial:
# stream-K over that wave only, whole tiles first (sk_waves=0; _many_waves).  (8, 96) on single
# CTAs until the forty-seventh session; MANY_WAVES_CLUSTERS: the (cluster_m, cluster_n) it covers
MANY_WAVES = (7, 64)
MANY_WAVES_CLUSTERS = ((1, 1), (2, 1), (2, 2))
# Static 128 x 256 tiles on 2 x 2 clusters (rows off 128-byte lines: _off_rows_blocks) whose blocks
# fill at most QUAD_SK_256[0] of one wave of the clusters, K of at least QUAD_SK_256[1] 64-wide
# steps: stream-K over the blocks and every cluster of the wave, the owner fix-up
# (_streamk_256_blocks).
# On an H100 (RESULTS.md, eighty-first session, × cuBLAS, fp16): 13 such sizes, 12 ahead by
# 0.02-0.18 (1024x2344x7456 0.68 -> 0.82, 1192x1992x9544 0.89 -> 1.06), one level (-0.01); below
# 100 steps level or behind (512x5496x4104 0.83 -> 0.75), at 0.87 of a wave level (-0.01, +0.03),
# and past one wave mixed (2072x3040x13200, 1.8 waves, 0.84 -> 0.78).  On six sizes drawn after it
# (21 of 6000 typed sizes change), fp16 and bf16: ahead in 10 of 12 runs by 0.03-0.11, level in two;
# None: never
QUAD_SK_256: tuple[float, int] | None = (0.8, 100)
# ... and such blocks past one wave of the clusters but below DUO_SK_256[2] waves, over at least
# DUO_SK_256[0] rows of tiles and DUO_SK_256[1] 64-wide K steps: stream-K on 2 x 1 clusters (B
# multicast over the pair), sk_waves 1, the owner fix-up (_streamk_256_blocks).  Off (None): on an
# H100 it gained on the sizes it was fitted on (RESULTS.md, eighty-second session: 15 of 17 ahead
# by 0.02-0.12, 1352x9128x6928 0.81 -> 0.85-0.87), then lost on 17 sizes drawn after it (eighty-
# third session: geomean 0.921 -> 0.902 of cuBLAS in fp16, 0.930 -> 0.900 in bf16; behind on
# eight and nine, 3832x2008x7120 1.00 -> 0.84, 5000x1304x6232 0.94 -> 0.80, ahead on six and five,
# 9608x1544x7176 0.63 -> 0.85).  The pairs load A unshared, a third more bytes a CTA than the
# 2 x 2 clusters, and what they kept of the gain that filling 12 idle SMs promises ranged from
# 0.72 to 0.92 with no measured feature to tell which.  None: never
DUO_SK_256: tuple[int, int, int] | None = None
# One partial wave (half the SMs or more hold a tile, none two): static, not stream-K, for 128-wide
# tiles and for 192-wide ones up to this many 64-wide K steps (fit_policy; 64 until the
# twenty-sixth session, which measured static ahead at 69 and 74 steps)
PARTIAL_WAVE_STATIC_K = 96
# Fewer tiles than half the SMs: stream-K only where K, in 64-wide steps, exceeds
# FEW_TILES_SK[0] times a CTA's even share of the tile-steps plus FEW_TILES_SK[1], or
# FEW_TILES_SK[2] steps (fit_policy)
FEW_TILES_SK = (2.0, 30, 64)
# 16-bit products whose row-major B is read in place with rows off 32-byte sectors (b_rows_off):
# static 128x128 tiles over at least two waves take 128 x OFF_ROWS_WIDTH tiles instead, which
# read fewer bytes of B per FLOP through the L2 that such rows overload (choose_config); None: never
OFF_ROWS_WIDTH: int | None = 192
# ... and where such tiles fill from OFF_ROWS_ONE_WAVE of a wave to one whole wave, the wider ones
# fit in one wave too, and the off-rows clusters below would not take the 128-wide tiles: the
# wider tiles, final (those clusters, which the margin would take against them, lost).  Only the
# heuristic's own config: the transposed product's config that ``swap_pays`` weighs and the rest
# band that ``tail_split`` prices keep the 128-wide tiles (``one_wave=False``), whose cost the
# wave model knows (through those two the rule flipped swaps and splits measured ahead before,
# 4856x304x2104 1.00 -> 0.93, 2128x4248x2584 0.97 -> 0.91).  On seven sizes drawn in the class
# (narrow M, 105-130 tiles of 128 x 128), fp16 and bf16: ahead in 11 of 14 runs by 0.02-0.11 of
# cuBLAS (592x3288x8104 0.74 -> 0.85, 304x5256x9504 0.58 -> 0.65), level in one, behind by
# 0.01-0.02 in two; 2-CTA and 2 x 2 clusters of 128 x 256 behind 192 on all seven; then on three
# sizes drawn after, fp16: ahead on all three by 0.03-0.06 (272x5032x2600 0.66 -> 0.72).  Where
# the clusters took the 128-wide tiles, 192 lost on all eight drawn, fp16 (1320x1032x6624 1.29 ->
# 0.98, 1000x1960x13200 0.84 -> 0.70), so there the clusters stay.  RESULTS.md, forty-fourth
# session; None: never
OFF_ROWS_ONE_WAVE: float | None = 0.75
FEW_STAGES_K = (4, 4)  # K of at most 4 64-wide steps: the cooperative tiles on 4 stages (choose_config)
# 16-bit products whose 128-wide stream-K tiles run from MID_WAVES[0] to MID_WAVES[1] waves take
# 128 x MID_TILE[0] tiles on MID_TILE[1] stages where those pad no more columns, or a few more
# where the last row of tiles is at most half filled or they fit in one wave (choose_config,
# _mid_tile_pays)
MID_TILE = (192, 4)
MID_WAVES = (1.03, 3.0)
ONE_WAVE_FROM = 1.15  # 128-wide waves from which one wave of 192-wide tiles pays (_mid_tile_pays)
# 16-bit 128-wide stream-K tiles, one CTA a tile, over more than one wave and fewer than this many
# waves (ONE_WAVE_FROM's bound, from which _mid_tile_pays takes one wave of 192-wide tiles), where
# B's rows are off 128-byte lines (b_rows_off_128, on 32-byte sectors or not) and the 128 x
# MID_TILE[0] tiles fit in one wave: those, static, final.  Stream-K there splits nearly every tile
# of 128 x 128 over rows the L2 serves at a loss.  On 14 such sizes, fp16, and 6, bf16 (H100,
# RESULTS.md, seventy-fifth session; 133-145 tiles): static 192 ahead of stream-K in 20 of 20 runs,
# geomean 0.667 -> 0.780 and 0.650 -> 0.735 of cuBLAS (1136x1872x7320 0.77 -> 1.03); then on ten
# sizes drawn where the rule changed the call, as callers get them: ahead in 18 of 20 runs by
# 0.02-0.27 (1096x1840x2120 0.80 -> 1.07), behind in two on 4560x472x6032 (0.90 transposed -> 0.85
# on a copy of B: the sizes whose B may be copied K-major are left out since); on eight more,
# ahead in 15 of 16 runs, level in one, where the swap took two of them transposed (0.62-0.73 of
# cuBLAS, 0.74-0.81 on the 192-wide tiles: since, the swap is priced against the 128-wide tiles,
# _past_wave_priced); with both, on eight more, ahead in 16 of 16 runs by 0.08-0.25 (geomean
# fp16 0.707 -> 0.825, bf16 0.707 -> 0.828).  Only the heuristic's own config (one_wave, as
# OFF_ROWS_ONE_WAVE); None: never
OFF_LINES_PAST_WAVE: float | None = ONE_WAVE_FROM
# K of FILL_MIN_K_STEPS 64-wide steps or more: wider static waves measured ahead even without the
# TMA-store epilogue (_cheapest_waves, and the stream-K price below)
FILL_MIN_K_STEPS = 16
# The cheapest waves (_cheapest_waves), last: a static launch of 128 x w tiles costs its waves
# times w times WAVE_COST[w] (an SM's time per column of a 128-row tile, relative to 128 wide,
# fitted to 36 shapes drawn at random, K 1024-16384: RESULTS.md, nineteenth session); stream-K
# over the chosen tile costs its tiles' columns shared evenly over the SMs times SK_OVERHEAD (K of
# FILL_MIN_K_STEPS 64-wide steps or more, shorter K: the fix-ups and the CTAs' K loops out of step)
CHEAPEST_WIDTHS = ((128, 6), (192, 4), (224, 4), (256, 4))  # (tile_n, stages)
WAVE_COST = {128: 1.0, 192: 0.94, 224: 0.94, 256: 0.92}
# Widths that are not whole 64-wide boxes: over a B read row-major (choose_config's b_row_major) a
# tile loads whole boxes, 256 columns for 224, and every other tile column starts off a 128-byte
# line.  From K of ROW_MAJOR_BOXES_MIN_K 64-wide steps, where such a width would take more tile
# columns than the boxes' width (_whole_boxes_pay), the cheapest waves and the narrow widths
# (_cheapest_waves, NARROW_WIDTHS) take the next cheapest width instead where it is one of those
# it gives way to (192, 256; _boxes_pick); the transposed product is priced against the config it
# replaced (_swap_config).  RESULTS.md, eighty-fifth session (H100, two draws where leaving 224
# out changed a caller's route): to 256 or 192 from 33 steps, ahead on 23 of 29 sizes in fp16
# and in bf16 (by up to 0.20), behind on four and two; to 128, behind on all five; below 33 steps
# behind on five of eight; the transposed product on 224 given up, behind on three.  {} or
# None: never
ROW_MAJOR_BOXES: dict[int, tuple[int, ...]] | None = {224: (192, 256)}
ROW_MAJOR_BOXES_MIN_K = 33
# A 16-bit config of 192-wide tiles, one CTA per tile and the staged epilogue, where 160-wide tiles
# take as many tile columns (192 < N <= 320, for instance): SAME_COLUMNS_160 (tile_n, stages)
# instead, the same tiles, waves and policy with a sixth fewer columns multiplied (a row-major B
# loads 192 columns a tile either way); None: never (choose_config, _same_columns_160).  On the
# H200, N of 272-304: 0.63-0.95 -> 0.66-1.05 of cuBLAS (RESULTS.md, thirty-third session)
SAME_COLUMNS_160: tuple[int, int] | None = (160, 4)
# 16-bit configs that ``gemm_parts`` picks for a B it reads K-major (a column-major B, or the copy
# ``copies_b_k_major`` makes), one CTA per 128-row tile with the staged epilogue, N of at most
# EXACT_MAX_N: the narrowest of these exact widths (tile_n, stages) that takes as many tile columns
# of N instead (``exact_width``): the same tile grid, waves and policy, fewer padded columns
# multiplied.  Measured at 144 and 176 on N of 264-528 (RESULTS.md, thirty-fifth session); 208 and
# 240, and wider N (where 192 -> 176, 224 -> 208 and 256 -> 240 would fire), were not, so they
# stay opt-in configs.  None: never
EXACT_WIDTHS: tuple[tuple[int, int], ...] | None = ((144, 5), (176, 4))
EXACT_MAX_N = 640
# Wide tiles where gemm_parts reads B K-major (``wide_tile``): (tile_n, stages, epilogue), narrowest
# first; None: never.  Taken where they need fewer tile columns than 256-wide tiles, N at most
# WIDE_MAX_N, K at least WIDE_MIN_K, and their tiles fill one wave to at least WIDE_FILL.
WIDE_TILES: tuple[tuple[int, int, str], ...] | None = ((288, 4, "pair"), (320, 4, "pair"), (384, 3, "staged"))
WIDE_MAX_N = 768
WIDE_MIN_K = 2048
WIDE_FILL = 0.7
# ... static where they fill at least WIDE_SK_FILL of the wave, else stream-K (the owner fix-up).
# On the H200 (RESULTS.md, thirty-seventh session, × cuBLAS): at 0.70-0.74 of a wave stream-K led
# static in 14 of 18 runs (12032x280x8192, B copied before the timing, 0.98 -> 1.05; narrow-M
# products run transposed all six drawn runs ahead, 264x12432x15712 0.73 -> 0.79; behind by
# 0.01-0.03 on 11872x272x5096 and 11920x352x4544); from 0.77 of a wave behind in 7 of 8 runs on four
# drawn sizes (14896x272x2464, 0.89 of a wave: 0.79 -> 0.56), at 0.83 level (14080x264x4096) or
# ahead (280x14080x5120 transposed, 0.77 -> 0.81); 0: never
WIDE_SK_FILL = 0.75
# ... and K of at least WIDE_SK_MIN_K (shorter K: static wherever they fill WIDE_FILL).  On the H200
# (RESULTS.md, fifty-third session, fp16 and bf16, × cuBLAS, tiles filling 0.70-0.74 of a wave):
# narrow-M products transposed on 288-wide tiles, at K of 1456-3144 static ahead in 24 of 24 runs
# by 0.04-0.15 (272x12520x1632 0.70 -> 0.83-0.86), at K of 3904-6080 within 0.03 either way but
# one run; on 320-wide tiles (K of 4912-5488) stream-K ahead in 6 of 6 by 0.04-0.08; narrow-N
# products on B's K-major copy, static ahead at K = 2808 (0.71 -> 0.82), within 0.04 either way at
# K of 4472-5816; from 7312 stream-K ahead (thirty-seventh session).  0: stream-K at any K
WIDE_SK_MIN_K = 4096
# ... and in the transposed product (``_swap_config``) over a row-major A, with the columns
# epilogue (whose default buffers leave room for three stages; 288 takes four, SWAP_WIDE_CHUNKED
# below): 288 and 320 only (384 not measured there),
# K of at least SWAP_WIDE_MIN_K[width].  On three stages, at K of 2080-4096 three of four such
# products lost (320 wide on 296x11952x3200 and 320x13808x2080; thirty-sixth session): 320 from 65
# k-steps.  288 on four stages (SWAP_WIDE_CHUNKED): on six sizes drawn at K of 2072-4000, where
# 4097 kept the transposed product on 192- or 160-wide stream-K tiles, ahead in 12 of 12 runs
# (fp16 and bf16) by 0.11-0.28 (520x7112x2584 0.56 -> 0.86, 560x6728x3104 0.80 -> 1.00;
# RESULTS.md, fortieth session): from 32 k-steps
SWAP_WIDE_TILES: tuple[tuple[int, int, str], ...] | None = ((288, 3, "columns"), (320, 3, "columns"))
SWAP_WIDE_MIN_K: dict[int, int] = {288: 1280, 320: 4097}
# ... 288 wide from K = 1280 (SWAP_TMA_MIN_K: below it a direct product under TMA stores is not
# transposed at all) since the fifty-third session, where on 20 sizes drawn at K of 1280-2047
# (narrow M of 265-794 rows, fp16 and bf16) 288-wide tiles led the transposed product's 192-wide
# ones or the direct product in 40 of 40 runs, geomean 0.68-0.69 -> 0.88-0.89 (RESULTS.md).  And
# also where ``swap_pays`` would not transpose the product on its own tiles but its wide tiles pad less
# (``_wide_swap_pays``: an M of 257-288 at short K, whose transposed product's own tiles are 192
# wide; same draws, and six at K = 2048: 0.62 -> 0.88); False: only where ``swap_pays`` does
SWAP_WIDE_PRICED = True
# ... on 2 x 1 clusters (cluster_m = 2: a tile column's two CTAs multicast their B, the rows of A,
# whose offsets from 128-byte lines held these products back): on four narrow-M products with
# A's and B's rows off 128 bytes, 0.64-0.73 of cuBLAS on single CTAs against 0.77-0.88 on the
# clusters (RESULTS.md, thirty-eighth session); 1: single CTAs.  (A copy of A into rows padded to
# 128 bytes instead gained as much on single CTAs, 0.76-0.86, and lost 0.01-0.06 on the clusters:
# not kept, thirty-eighth session)
SWAP_WIDE_CLUSTER_M = 2
# ... only where A's rows are off 32-byte sectors (K an odd multiple of 8 in a contiguous 16-bit A:
# the transposed product's ``b_rows_off``).  With A's rows on sectors the clusters trailed single
# CTAs in 6 of 7 runs by 0.01-0.04 (320x12352x5088 0.90 -> 0.88, 288x14896x14704 0.89 -> 0.85) and
# were level on one, where off sectors they led by 0.06-0.16 in all eleven (RESULTS.md,
# thirty-eighth and thirty-ninth sessions); then on twelve runs drawn where this rule changes the
# call, single CTAs ahead in nine, level in one, behind by 0.03-0.04 in two (geomean fp16 0.831 ->
# 0.841, bf16 0.831 -> 0.840); False: wherever the tiles are wide
SWAP_WIDE_CLUSTER_OFF_SECTORS = True
# ... and of these widths on more stages, the columns epilogue staging fewer columns at a time to
# make room ((tile_n, stages, out_cols)): 288 wide on four stages, 48 columns at a time, where the
# default chunk (144) leaves room for three.  On eight narrow-M products (RESULTS.md, thirty-ninth
# session, fp16) 0.74-0.92 of cuBLAS on three stages, 0.79-1.02 on four (264x15128x5264 0.74 ->
# 0.90, 544x6952x6000 0.83 -> 0.98); the smaller chunk alone costs up to 0.01.  Then on six
# sizes drawn where the rule changes the call, fp16 and bf16: ahead in 12 of 12 runs by 0.07-0.20,
# geomean 0.816 -> 0.943 and 0.813 -> 0.946 (288x14480x4304 0.83 -> 1.03).  (): none
SWAP_WIDE_CHUNKED: tuple[tuple[int, int, int], ...] = ((288, 4, 48),)
# ... and over M and N past WIDE_MAX_N, where ``swap_pays`` does not, one wave of the transposed
# product's tiles SWAP_ONE_WAVE_WIDE[0] wide (tiles ``WIDE_FILL`` of a wave to one, K of at least
# ``SWAP_WIDE_MIN_K``) where the direct config takes more than one wave of cooperative 128-row tiles
# (``_wide_one_wave``), dressed as the narrow-M wide tiles above (four stages, 48-column chunks),
# on the 2 x 1 clusters over A's rows off sectors only where the tiles span M in at most
# SWAP_ONE_WAVE_WIDE[1] columns.  On the H200 (RESULTS.md, forty-sixth session, × cuBLAS), fp16
# and bf16 alike: 4728x856x4400 0.67 -> 0.93 (17 columns of 288 across M), 840x5528x6264 0.70 ->
# 0.96 and 776x4968x3304 0.58 -> 0.84 (three columns, clusters), 2384x1784x2800 0.67 -> 0.93,
# 1040x4224x12976 0.75 -> 0.92; behind where ``swap_pays`` ran it transposed on 256-wide tiles
# (3432x1056x5648 0.96 -> 0.88, 960x4136x6744 0.80 -> 0.50), on clusters across twelve columns
# (3408x1328x3880 0.76 -> 0.51, 3416x1304x13240 0.64 -> 0.54), and where the direct product ran one
# wave already (808x4144x10352, 128 x 256: 0.84 -> 0.78); None: never
SWAP_ONE_WAVE_WIDE: tuple[int, int] | None = (288, 3)
SK_OVERHEAD = (1.2, 1.6)
# ... over at most this many static waves, the config's and the cheapest width's (4 until the
# twenty-seventh session: then, e.g., 12 waves of 128-wide tiles stayed where 8 of 192 were 0.15
# of cuBLAS ahead; RESULTS.md)
CHEAPEST_MAX_WAVES = 64
STATIC_GAIN = 0.95  # one static width gives way to another only at this share of its cost or less
# stream-K gives way to static waves that cost up to this times its own estimate (_cheapest_waves;
# 1.0 until the twenty-sixth session, RESULTS.md)
SK_GIVE_WAY = 1.06
# 16-bit static launches of one 128-row tile per CTA, narrower than 256, over two waves (more
# than one) and K of at least SK_256_OVER_STATIC[1] 64-wide steps: stream-K over 128 x 256 tiles
# (single CTAs, or the clusters below) where the wave model (_config_cost) prices it below
# SK_256_OVER_STATIC[0] times the static waves as they run (exact widths over a K-major B)
# (_streamk_256; RESULTS.md, fifty-eighth and fifty-ninth sessions); None: never
SK_256_OVER_STATIC: tuple[float, int] | None = (1.0, 64)
# ... on 2 x 1 clusters (B multicast to the pair of row tiles) where pairing the rows of tiles pads
# at most this share of them (an odd count: one row of CTAs idle; RESULTS.md, fifty-ninth session);
# None: single CTAs always
SK_256_CLUSTER_PAD: float | None = 0.05
# 128x160 is left out: its fitted cost (1.03) made it the cheapest on 16 % of shapes drawn at
# random, and where it was measured it ran -0.17..+0.17 of cuBLAS against the rule's pick (ahead
# in 84 of 114 runs; 1312x1776x16384 0.87 -> 0.70-0.72, 2304x1024x8192 0.86 -> 0.72-0.76).  A
# row-major B still loads 192 of its columns per tile: its tiles move as many bytes as 192-wide ones.
# 16-bit products whose row-major B is read in place with rows off 128-byte lines (b_rows_off(...,
# 128)): 2-CTA clusters multicasting B (half of B's reads through the L2 that such rows overload),
# static, of the width whose cluster waves cost least, where that costs no more than the heuristic's
# config: (tile_n, stages, cost of an SM's column of a 128-row tile relative to 128 wide), fitted to
# 21 shapes and checked on 16 drawn after (RESULTS.md, twenty-second session); under the 128-byte
# L2 promotion of such rows (L2_PROMOTION), on ten sizes drawn where it decides, still ahead in 13
# of 20 runs (geomean fp16 0.873 -> 0.909, bf16 0.864 -> 0.914; forty-fourth session); () turns
# the rule off (choose_config)
OFF_ROWS_CLUSTERS = ((128, 6, 1.0), (256, 4, 0.8))
# ... where their waves cost at most this share of the config's: (rows also off 32-byte sectors,
# rows on sectors); the former overload the L2 more (RESULTS.md, twentieth and twenty-second
# sessions).  (1.0, 1.0) under the promotion: level on ten sizes drawn where the margin decides
# (geomean 0.826 against 0.825 fp16; ahead in 12 of 20 runs, behind in 8 by up to 0.24, mostly
# where without the clusters the product ran transposed or on a copy of B; forty-fourth session)
OFF_ROWS_CLUSTER_MARGIN = (1.2, 1.0)
# ... but not on sectors where the config is one wave of single CTAs, more than half a wave
# (HALF_WAVE_HALVES: those run halves of their tiles, paired on clusters where these are), whose
# cost the clusters only match and whose rows of tiles are odd (the pairs pad one more): fitted on
# two products (376x3440x2384 bf16, three rows: 0.87 of cuBLAS on 2 x 2 clusters, 1.02 on single
# CTAs; against it 472x3120x5168, four rows, where the clusters led 1.14 to 1.06-1.10; H100).  On
# 16 sizes drawn after where it changed the call (fp16 8, bf16 8; H200, RESULTS.md, seventy-fourth
# session), the 14 past half a wave: ahead in 9 by 0.02-0.23 (816x2016x5800 bf16 0.69 -> 0.92,
# 784x2032x2176 fp16 0.67 -> 0.83), behind in 3 (1136x1328x7088 fp16 0.85 -> 0.67, 3664x304x2584
# bf16 1.01 -> 0.96, 1152x1456x2280 bf16 1.09 -> 1.06), level in 2; geomean fp16 0.826 -> 0.843,
# bf16 0.894 -> 0.947 (the two at half a wave, ahead by 0.08 and 0.22, are left to the halves'
# rule, measured there).  It changes 31 of 2000 sizes drawn as a user types them.  False: never
OFF_ROWS_ODD_TIE = True
# ... but products of at most NARROW_N columns on 32-byte sectors (not b_rows_off), whose few
# tile columns the clusters' 128 or 256 widths pad, take static tiles of the NARROW_WIDTHS
# (tile_n, stages, cost per column as in WAVE_COST, most 64-wide K steps or None) instead where
# their waves cost less than the clusters' and the config's (_off_rows_clusters; RESULTS.md,
# twenty-fifth session); 0: never.  160 pads least but a row-major B loads 192 of its columns per
# tile: only for short K (at K = 4696 and 15040 it was 0.01 and 0.09 of cuBLAS behind the clusters)
NARROW_N = 1024
NARROW_WIDTHS = ((160, 4, 1.03, 16), (192, 4, 0.94, None), (224, 4, 0.94, None))
# ... and where A's rows are off 128-byte lines too (a_rows_off_128), 2 x 2 clusters of the same
# width (cluster_n=2: A multicast as well) where their waves are no more, at most BLOCK_PAD of
# their CTAs sit on a tile column past N (an odd number of tile columns), and, at the widths of
# SPLIT_OVER_BLOCKS, the 2-CTA config would not run as two launches (tail_split) (RESULTS.md,
# twenty-fourth session: 256 wide, the split ahead of 2 x 2 on five of five shapes; twenty-sixth:
# 128 wide, 2 x 2 ahead of the split on ten of eleven, level on one; forty-fourth, under the
# 128-byte promotion, eight sizes drawn where it decides, fp16: ahead on six by 0.01-0.03, level on
# two); False: never
OFF_ROWS_BLOCKS = True
BLOCK_PAD = 0.1
SPLIT_OVER_BLOCKS = (256,)
# 4-CTA clusters that one wave holds, by SM count (cuOccupancyMaxActiveClusters for the 128-row
# configs, 2 x 2 and 4 x 1 alike: 30 on the H200's 132 SMs, so a wave leaves 12 SMs idle, against
# 66 2-CTA clusters); sms // 4 where not listed
QUAD_CLUSTERS: dict[int, int] = {132: 30}
# A static 2-CTA cluster launch whose last wave is short runs as two, on two bands of rows
# (``tail_split``), where the wave-cost model puts both at most this share of the one (None:
# never; RESULTS.md, twenty-third session: measured on cluster launches only)
TAIL_SPLIT = 0.9
TAIL_SPLIT_MIN_K_STEPS = 32  # ... and K of at least this many 64-wide steps (measured from 2176 on)
# 16-bit products that the heuristic runs on 128 x 128 tiles, one CTA per tile (stream-K or static),
# filling less than QUAD_SK[0] of a wave, with K of QUAD_SK[1] 64-wide steps or more, and whose 2 x 2
# blocks of tiles hold at most QUAD_SK[2] times the tiles (rows or columns past the grid): stream-K
# over those blocks and the 4-CTA clusters, each CTA of a cluster on the same k-range of its own
# tile, A and B multicast, whatever B's rows (_quad_streamk_pays; RESULTS.md, thirty-first
# session); with the spread fix-up only on at most QUAD_SK[3] blocks (four blocks on 28 clusters
# ran behind 128 CTAs of one CTA a tile); None: never
QUAD_SK: tuple[float, int, float, int] | None = (0.75, 64, 1.2, 2)
QUAD_SK_POLICIES = ("streamk", "static")  # ... in place of the heuristic's config with these policies
# ... not where the config the product takes without that rule is split-K on 128 x 192 single-CTA
# tiles whose area is at most 1 / QUAD_SK_192_PAD of the 2 x 2 blocks' (the blocks, rounded to even
# tile rows and columns, cover a fifth more); None: never kept from it (_quad_wider_split;
# RESULTS.md, seventy-ninth session)
QUAD_SK_192_PAD: float | None = 1.2
# ... static on those clusters, where stream-K would take fewer than QUAD_SK_STATIC 64-wide K steps
# off each cluster's (its blocks' K steps times the share of the clusters that static leaves idle:
# less than a fix-up costs); the heuristic's own config only (one_wave: not the transposed product
# that swap_pays weighs, nor tail_split's rest band, which the wave model prices); None: always
# stream-K (_quad_static; RESULTS.md, seventy-sixth session)
QUAD_SK_STATIC: int | None = 25
# 16-bit products whose config is stream-K over single CTAs of 128 x 192 or 128 x 256 tiles (no
# split-K, no clusters) over ROWS_QUAD[0] rows of tiles (a tuple of counts), with B's rows off
# 128-byte lines (b_rows_off_128, or off 32-byte sectors too), as the heuristic's own config
# (one_wave): static 128 x 256 tiles on 2 x 2 clusters instead, which multicast A along the tile
# row and B down the column (such rows overload the L2 that single CTAs read B through); not where
# the last (or only) wave of the clusters holds less than ROWS_QUAD[1] of one (_rows_quad).  Led
# by three sizes (RESULTS.md, eighty-seventh session), then on twelve drawn at three rows (seed
# 20261244, H100, eighty-eighth session): fp16 ahead on 10 (0.58 -> 0.69, 0.57 -> 0.72, 0.68 ->
# 0.84), bf16 on 10, level on 336x6448x14080 (0.93 -> 0.91, 0.89 -> 0.89), behind on
# 312x8520x2712 (0.80 -> 0.61, 1.15 -> 0.87), whose 34 clusters take a second wave of four; on
# four at two rows ahead on all (0.64 -> 0.80, 0.70 -> 0.93); at five and seven rows behind on
# three of eight by up to 0.21, so those keep their config.  Then on sixteen drawn after at two and
# three rows (seeds 20261260-61): ahead in 28 of 32 runs, geomean fp16 0.722 -> 0.814, bf16 0.715
# -> 0.813; behind in four, on the two sizes whose config was 128 x 128 stream-K (360x11600x3792
# 0.81 -> 0.69), which the rule has left since (not measured after).  None: never
ROWS_QUAD: tuple[tuple[int, ...], float] | None = ((2, 3), 0.5)
# 16-bit products that the heuristic runs as stream-K on 128 x 128 tiles, one CTA per tile, so few
# that a wave holds SPLIT_K[0] to SPLIT_K[1] CTAs a tile (sms // tiles): split-K (sk_ways), that
# many equal k-slices a tile, every tile's slices read in step, the owner fix-up, in place of
# stream-K over every SM, and of QUAD_SK's clusters where A's and B's rows are on 128-byte lines
# (_split_k; RESULTS.md, forty-eighth session); None: never
SPLIT_K: tuple[int, int] | None = (2, 4)
# 16-bit products over a deep K whose 128 x 256 tiles a wave holds DEEP_SPLIT[0] to DEEP_SPLIT[1]
# CTAs of (sms // tiles), each of at least DEEP_SPLIT[2] 64-wide K steps, where 256-wide tiles
# would pad M or N to at most DEEP_SPLIT[3] times what 128-wide ones do: split-K on those tiles,
# that many CTAs a tile, the spread fix-up, B multicast over 2 x 1 clusters where B's rows are off
# 128-byte lines and the tile rows pair up (_deep_split; RESULTS.md, fifty-second session); None:
# never
DEEP_SPLIT: tuple[int, int, int, float] | None = (3, 8, 96, 1.15)
# ... on those clusters too where the tile rows are odd but at least this many (one row of CTAs
# in ten or fewer past M; None: only even rows)
DEEP_SPLIT_ODD_ROWS: int | None = 9
# ... and where a wave holds more than DEEP_SPLIT[1] and at most this many CTAs a tile: the same
# split, always on the 2 x 1 clusters, whatever B's rows, where those tiles pad N by at most
# DEEP_SPLIT[3] and the clusters' rows of tiles are as above (None: never)
DEEP_SPLIT_FEW: int | None = 16
# ... and in place of such static tiles (one partial wave, or fewer tiles than half the SMs on a
# short K: fit_policy) where K has at least this many 64-wide steps (None: never)
SPLIT_K_FROM_STATIC: int | None = 40
# 16-bit products that the heuristic runs on static 128 x 128 tiles (one CTA or clusters) of one
# wave that holds one CTA a tile (more than half the SMs), over K of at least SPLIT_K_192[0] 64-wide
# steps, where SPLIT_K_192[1] CTAs on each of their 128 x 192 tiles fit one wave: split-K on those
# tiles, that many equal k-slices a tile, one CTA each, the owner fix-up (_split_k_192; RESULTS.md,
# fifty-third session); None: never
SPLIT_K_192: tuple[int, int] | None = (128, 2)
# 16-bit static launches on clusters (2 x 1 or 2 x 2) over more than one wave of their blocks,
# whose last wave leaves the average cluster below CLUSTER_TAIL_SK[0] of the busiest one's blocks,
# over K of at least CLUSTER_TAIL_SK[1] 64-wide steps past two waves; at two waves or fewer, over
# K of at least CLUSTER_TAIL_SK[2] steps, or of CLUSTER_TAIL_SK[1] where the average cluster has
# less than CLUSTER_TAIL_SK[3] of the busiest one's blocks; on the staged epilogue: stream-K over
# the last two waves on the same clusters, the owner fix-up (_cluster_tail_sk; RESULTS.md,
# fifty-fourth session; the terms at two waves or fewer from the fifty-eighth and fifty-ninth,
# 32 steps before); None: never
CLUSTER_TAIL_SK: tuple[float, int, int, float] | None = (0.9, 32, 96, 0.8)
# ... and on the thin pingpong tiles (THIN_TILE) where they run stream-K (_split_k)
SPLIT_K_THIN = True
# 16-bit products that the heuristic runs as stream-K with the spread fix-up on at most this many
# 128 x 128 tiles, one CTA each (a tile split tens of ways over a long K): halves of those tiles,
# 128 x 64, on 1 x 2 clusters that multicast A (_paired_halves; RESULTS.md, forty-ninth session);
# 0: never
PAIRED_HALVES = 2
# 16-bit products of more than one row of tiles that the heuristic runs in one wave of at most
# this share of the SMs' 128 x 128 tiles, static on single CTAs: 128 x 64 tiles (eight stages),
# twice the CTAs in that one wave (_half_wave_halves; RESULTS.md, fiftieth session; above 0.5 reads
# as 0.5, so that the halves still fit one wave); None: never
HALF_WAVE_HALVES = 0.5
# ... and where those tiles run on 2 x 1 or 2 x 2 clusters (rows off 128-byte lines), the halves
# paired on 1 x 2 clusters that multicast A; 2 x 1 clusters stay where N > 2 M (they multicast B,
# then most of the reads)
HALF_WAVE_CLUSTERS = True
# ... and on single CTAs where N > M, the halves along M: 64 x 128 tiles (cooperative, each consumer
# warpgroup half the columns); False: 128 x 64 there too
HALF_WAVE_ALONG_M = True
# 16-bit products whose row-major B is read in place with rows off 128-byte lines, of at most
# B_K_MAJOR[0] columns, at least B_K_MAJOR[1] rows, K of at least B_K_MAJOR[2] and M x N x K of at
# least B_K_MAJOR[3] (the copy's few microseconds against the product's), on which the
# heuristic puts one CTA per tile and that ``gemm_parts`` does not run transposed (``swap_pays``):
# B is copied K-major (N rows of K, padded to 128 bytes, by ``transpose_copy``) inside the call and
# the product runs on the copy, read as K-major B^T (``copies_b_k_major``).  A 160-wide tile then
# loads 160 rows of B^T per stage, where a row-major B loads three 64-wide boxes, 192 columns, over
# rows the L2 serves at a loss (RESULTS.md, thirty-fourth session: on 24 such sizes drawn as a user
# types them, ahead in 44 of 48 runs, time ratios up to 1.30, level in two, behind by 0.04 of cuBLAS
# on one size; M below 8192 then lost to the copy, and where the heuristic takes clusters, whose
# multicasts halve B's loads already, the copy ran -0.09..+0.02; on the two drawn sizes that run
# transposed it ran level with that).  From M = 4096 since the exact widths (``EXACT_WIDTHS``),
# which the copy's config takes where they fit: on 8 sizes drawn with 4096 <= M < 8192, fp16 / bf16,
# 0.741 -> 0.845 / 0.733 -> 0.841 of cuBLAS, ahead in 14 of 16 runs (6272x264x14272 0.70 -> 0.99),
# behind on 6320x336x2128 (0.77 -> 0.73 / 0.78 -> 0.76; RESULTS.md, thirty-fifth session); with both
# rules on 8 sizes drawn after, 0.73 -> 0.81 / 0.74 -> 0.82, behind only on 4232x480x2088 (0.65 ->
# 0.61): the two sizes behind, of 21 us products, are below the work floor; None: never
B_K_MAJOR: tuple[int, int, int, float] | None = (640, 4096, 2048, 5e9)
# Not where B's rows lie on 64-byte lines and the product on the copy would run tiles of the width
# it runs in place (``k_major_copy_config``): such rows read in place at 0.92-0.95 of cuBLAS on
# 4200x480x5760 (128 wide either way), where the copy made it 0.79-0.83 (RESULTS.md,
# thirty-seventh session); where the copy's tiles are narrower (5000x416x6000: 160 in place, 144
# on the copy) it still pays (0.83 -> 0.97); on five sizes drawn where the width decides, copying
# anyway was level (geomean fp16 0.79 -> 0.80, bf16 0.785 -> 0.787; per size -0.05..+0.04).  Not
# where the heuristic puts the product in place on clusters (the off-rows rules' 2-CTA or 2 x 2
# clusters, whose multicasts halve B's loads) unless the copy runs wide tiles (below): on ten sizes
# drawn there (fp16 and bf16, the copy's config 128-256 wide, one CTA a tile), the copy was behind
# the clusters in 13 of 20 runs by 0.03-0.16 (4976x328x9864 0.85 -> 0.74, 7232x456x2816 1.06 ->
# 0.99), level in 5, ahead by 0.01-0.02 in two (RESULTS.md, forty-fourth session)
# ... but over those clusters wherever the product on the copy runs wide tiles (``WIDE_TILES``, one
# tile column over N of 257-320 where the clusters' 128-wide tiles pad N to 384, two over N up to
# 640)?  Yes: on 13 sizes drawn where it decides, ahead in 21 of 21 runs (fp16 and bf16) by
# 0.10-0.38 of cuBLAS, geomean fp16 0.65 -> 0.89 (13504x280x11864 0.56 -> 0.93; RESULTS.md,
# forty-sixth session)
B_K_MAJOR_WIDE_OVER_CLUSTERS = True
# 16-bit products whose heuristic configs, for C and for its transpose C^T = B^T A^T (N x M x K),
# are both cooperative with the staged epilogue, the transposed one on the direct one's cluster
# shape or on one CTA per tile: the transposed product, written into the output's transposed view
# through the "columns" epilogue, where its tiles' padded work (``_padded_work``) is below
# SWAP_MARGIN times the direct ones' (``swap_pays``; RESULTS.md, thirty-second session: fitted on
# 18 shapes, ahead in 20 of 22 runs where it fires; on 12 drawn after, ahead in 20 of 24 runs,
# behind by 0.01-0.02 in four).  None: never
SWAP_MARGIN: float | None = 0.97
# ... and where the direct config stores through TMA (K of at most TMA_STORE_K k-steps), from K
# of SWAP_TMA_MIN_K.  On eight sizes drawn where transposing there changes the call (RESULTS.md,
# fortieth session; fp16 and bf16, × cuBLAS): at K of 1280-1712 ahead in 10 of 10 runs by
# 0.03-0.19 (12168x560x1712 0.67 -> 0.84, 4176x536x1392 0.69 -> 0.85), at K of 312-992 behind in 6
# of 6 by 0.04-0.10 (536x8432x992 0.80 -> 0.71, 11208x1328x312 0.89 -> 0.79): the columns epilogue
# stores while the tile's SM waits, where TMA stores run on under the next tile.  From the least K
# measured ahead.  On six sizes drawn after (forty-first session, K of 1376-1712): ahead in 9 of 12
# runs by 0.01-0.26, level in one, behind by 0.04-0.05 in two (6680x2168x1712, where both products
# take the same 256-wide cluster tiles); geomean 0.79-0.80 -> 0.88-0.89.  None: never
SWAP_TMA_MIN_K: int | None = 1280
# ... and where the transposed product's B (A's rows, read K-major) is off 128-byte lines but on
# 32-byte sectors, so that the off-rows rules put it on clusters (``_off_rows_clusters``) that the
# direct config's single CTAs do not match: priced again (``swap_pays``) on the config the
# transposed product takes as if those rows lay on lines, on single CTAs.  Fitted on one product
# (1072x3008x14112: 0.70 of cuBLAS direct on 128 x 224 tiles, 0.96 transposed on them, fp16 and
# bf16); on 13 sizes drawn after where it changes the call (fp16 8, bf16 5; H100, RESULTS.md,
# seventy-fourth session): ahead in 8 by 0.05-0.15 (6896x2496x10160 0.76 -> 0.91, 12432x1152x2672
# bf16 0.82 -> 0.93), behind in 5 by 0.01-0.09 (2504x8704x6368 0.98 -> 0.89); geomean fp16 0.915
# -> 0.944, bf16 0.909 -> 0.991.  It changes 6 of 2000 sizes drawn as a user types them.  False:
# never
SWAP_SINGLE_ON_SECTORS = True
# ... and where the direct config is static 128 x 128 tiles on 2 x 1 clusters and the transposed
# product's is 128 x 256 tiles on 2 x 2 clusters (A and B both multicast), over K of at least
# SWAP_ONTO_QUAD 64-wide steps: the transposed product, whatever the padded work and though the
# cluster shape changes (``_onto_quad``), except where B would be copied K-major (``route``).  On
# an H100 (RESULTS.md, eighty-third and eighty-fourth sessions, fp16 and bf16, x cuBLAS): ahead on
# five of six such sizes of a first draw by 0.03-0.17, level on one; on the 20 sizes of two fresh
# draws of 6000 where it changed the route from 64 steps, ahead on all 19 that ran direct (geomean
# fp16 0.818 -> 0.997, bf16 0.825 -> 1.029; 14824x1032x10776 0.76 -> 1.19) and behind on the one
# where B was copied K-major (15168x296x9240 0.93 -> 0.65), now left to the copy; from 32 steps in
# place of 64, on 14 and 13 sizes of four and two more draws (33-60 steps; the class holds none
# below 33), ahead on all in both dtypes (0.881 -> 0.987 and 0.879 -> 0.994; 0.791 -> 0.911 and
# 0.789 -> 0.920).  It changes 14-16 of 6000 sizes drawn as a user types them.  None: never
SWAP_ONTO_QUAD: int | None = 32
# ... and from SWAP_ONTO_QUAD_WIDE steps over static 128 x 256 tiles on 2 x 1 clusters, whose
# transpose takes 128 x 256 tiles on 2 x 2 clusters (``_onto_quad``).  On an H100 (RESULTS.md,
# eighty-fourth session, x cuBLAS): on six such sizes of a draw of 6000, fp16, ahead on four and
# level on two (2920x1048x3240 1.07 -> 1.24); on 12 of a second draw, geomean fp16 0.914 -> 0.944
# and bf16 0.915 -> 0.959, ahead on 7 and 9 (15192x1072x13496 0.75 -> 0.88), behind on two by
# 0.01-0.03 (4384x656x4912 0.92 -> 0.89); through the caller's route on 18 sizes of a third draw where
# it changes the route from 32 steps, fp16 0.907 -> 0.936 and bf16 0.919 -> 0.950, ahead on 8 in
# each, level on the others but two in bf16 (0.02 behind).  It changes 45-65 of 6000 sizes drawn
# as a user types them.  None: never
SWAP_ONTO_QUAD_WIDE: int | None = 32
# 16-bit products over a row-major A and a B read with rows off ONE_WAVE_SWAP_ROWS bytes
# (``b_rows_off``) whose heuristic config is one wave of static single-CTA tiles with the staged
# epilogue, from OFF_ROWS_ONE_WAVE of a wave of 128-wide ones: the transposed product B^T A^T
# instead, on static 2-CTA clusters that multicast A^T (its B, read K-major), on whichever of these
# widths (tile_n, stages), spanning M, pads M least while its clusters fit one wave
# (``_one_wave_swap``): tiles of a width cut to M where the direct ones are 128 rows.  On the H200
# (RESULTS.md, forty-fifth session, fp16, × cuBLAS): fitted on five sizes with B's rows off 32-byte
# sectors, 288x5592x2920 0.79 -> 0.93, 568x2840x5968 0.65 -> 0.76, 1544x1256x8392 0.80 -> 1.03 (144
# wide), 352x5224x5704 0.93 -> 0.99, 1328x1480x5688 0.88 -> 0.99 (128 wide), the other width
# 0.01-0.12 behind where it padded more, 176 wide behind on all five; on ten drawn after, fp16 and
# bf16, ahead in 17 of 20 runs (520x2840x8440 0.69 -> 0.93-0.94, 1136x1784x8472 0.75-0.77 ->
# 0.97-0.98), level in one, behind by 0.01-0.03 in two.  Where the off-rows clusters take the tiles
# the transposed product lost on all ten sizes timed, and over B rows on 128-byte lines on four of
# five.  None: never
ONE_WAVE_SWAP: tuple[tuple[int, int], ...] | None = ((128, 6), (144, 5))
# ... B's rows off this boundary (bytes): 32 (sectors) as fitted; 128 (lines) takes B rows on
# sectors too: fitted on 11 such sizes, fp16 (ahead on 8, 264x5136x6112 0.65 -> 0.85; behind on
# three by 0.03-0.09, 368x5072x3920 0.96 -> 0.87), then on 8 drawn after, fp16 and bf16, ahead in
# 10 of 16 runs (264x4752x14176 0.59-0.60 -> 0.83-0.88), level in two, behind by 0.02-0.06 in four, geomean
# 0.85-0.86 -> 0.93-0.95; on a draw of the whole rule the one loss of six was such a size
# (368x4880x9376, 0.91-1.03 -> 0.77-0.90); on a second such draw of six, ahead in 9 of 12 runs
# (536x2848x9376 0.59-0.62 -> 0.76-0.82), behind by 0.02 in one and on 600x3104x1712 (TMA stores,
# since left out: ONE_WAVE_SWAP_TMA)
ONE_WAVE_SWAP_ROWS = 128
# ... also where the direct config stores through TMA, from K of SWAP_TMA_MIN_K, over B rows off
# 32-byte sectors (_swap_config): on three such sizes (K of 1472-1872), fp16 and bf16, ahead in 5
# of 6 runs by 0.06-0.11 (360x4264x1712 0.75-0.77 -> 0.85-0.86), level in one.  Over rows on
# sectors (off 128 bytes) it lost: 600x3104x1712 0.96-1.00 -> 0.81-0.82, against 0.03-0.07 ahead
# on 792x2192x1712 and 576x3312x1376
ONE_WAVE_SWAP_TMA = True


# 16-bit products over a row-major A whose heuristic config is 128 x 192 tiles of one CTA, static
# or stream-K (no split-K), with the staged or TMA-store epilogue, whose transposed product's
# 64 x 256 tiles fill SWAP_64_ROWS[0] of one wave to one, from K of SWAP_64_ROWS[1]: the
# transposed product on those tiles (``_swap_64_rows``), static, on five stages (the columns
# epilogue staging 64 columns at a time, ``out_cols``, makes room for the fifth): the tile cuBLAS
# runs there (its column-major view is the transposed product).  On the H100 (RESULTS.md,
# seventy-eighth session, × cuBLAS): fitted on 1024x2112 at K of 2048-16384 and on 1024x2080x12288,
# ahead in 10 of 10 runs (fp16 on all six, bf16 on four) by 0.05-0.19 (1024x2112x8192 0.91 ->
# 0.97-0.99, 1024x2112x6144 0.81-0.82 -> 0.97-1.00); the same tiles on four stages level (0.90-0.92), on
# 2 x 1 clusters 0.47-0.51; where the heuristic's 128 x 128 static tiles fill a wave (eleven sizes
# at K = 8192, 116-132 of the transposed tiles: 768x2816, 512x4224, 1280x1600, ...) behind in 15
# of 17 runs by 0.03-0.07 (ahead in two, bf16, where the heuristic's tiles ran low).  Only where
# A's and B's rows start on 128-byte lines: on the H100 (eightieth session) the rule was behind in
# 24 of 24 runs over twelve drawn sizes with either off lines (B's: 2880x672x4136 0.84 -> 0.59,
# 928x2104x9264 0.87 -> 0.68; A's: 2944x704x2136 0.95 -> 0.75), and ahead on 13 of 14 sizes with
# both on lines by 0.03-0.29 (3072x704x9920 0.70 -> 0.99, 3040x704x3200 0.89 -> 1.01; behind:
# 960x2112x8192 0.72 -> 0.70); the one size fitted off lines, 1024x2080x12288 (+0.07), goes with
# them.  None: never
SWAP_64_ROWS: tuple[float, int] | None = (0.97, 2048)

# The same the other way round (``_direct_64_rows``): where ``_swap_config`` would transpose the
# product onto 128 x 192 single-CTA tiles and the direct product's 64 x 256 tiles fill
# DIRECT_64_ROWS[0] of one wave to one, from K of DIRECT_64_ROWS[1], A and B row-major with their
# rows on 128-byte lines: the direct product on those tiles, static, five stages, the staged
# epilogue 64 columns at a time.  On the H100 (RESULTS.md, eightieth session, × cuBLAS, against
# the transposed 128 x 192 tiles): ahead on 6 of 7 sizes by 0.02-0.15 (2112x1024x4096 0.86 -> 1.00,
# 2096x1024x2048 0.82 -> 0.97, 664x2944x2880 0.81 -> 0.94; behind: 2112x1024x16384 1.20 -> 1.18);
# with B's rows off lines behind in 11 of 11 runs over six sizes by 0.10-0.64.  None: never
DIRECT_64_ROWS: tuple[float, int] | None = (0.97, 2048)


#: ``choose_policy`` splits where the SMs' average load is below this share of the busiest SM's:
#: the portable kernel's rule as it was measured for both kernels (the portable kernel's own moved
#: to ``kernels.SPLIT_FILL`` = 0.9 in the twenty-eighth session; above 0.8 this kernel's other
#: rules, the cheapest static waves and the wide tile, were tuned against it)
SPLIT_FILL = 0.8


def choose_policy(tiles: int, slots: int, k_iters: int, shared: bool = False) -> str:
    """The rule of ``mgemm.kernels.choose_config`` (one CTA per SM here): ``dynamic`` when other
    kernels share the GPU; ``streamk`` where ``mgemm.kernels.split_tail`` says a split pays (at
    this kernel's ``SPLIT_FILL``); else ``static``.

    >>> choose_policy(264, 132, 128), choose_policy(64, 132, 128), choose_policy(140, 132, 128)
    ('static', 'streamk', 'streamk')
    """
    if shared:
        return "dynamic"
    return "streamk" if split_tail(tiles, slots, slots, k_iters, SPLIT_FILL) else "static"


def choose_config(m: int, n: int, k: int, dtype: str, sms: int, *, allow_tf32: bool = False,
                  shared: bool = False, tile_n: int | None = None, b_rows_off: bool = False,
                  b_rows_off_128: bool = False, a_rows_off_128: bool = False,
                  one_wave: bool = True, b_row_major: bool = False) -> HopperConfig:
    """Tile width and policy for an ``m × n × k`` product on ``sms`` SMs.  Pure and deterministic.

    The rules, in the order they apply (from the fourth on, most for 16-bit inputs only; a given
    ``tile_n`` stops after the third; ``shared``, the dynamic policy, skips the fuller waves of
    the fifth and the sixth to the tenth); the paragraphs below give each one's measurements:

    1. at most 64 rows or columns: pingpong 64 x 64 tiles (``THIN_TILE``, ``_thin_config``), split-K
       where stream-K would split them (``_split_k``), unless it would split each eight or more
       ways (then the rules below);
    2. 128 or 256 wide by the waves their tiles fill and K (``WIDE_WAVE_FILL``, ``SHORT_K``), the
       stages for the shortest K (``FEW_STAGES_K``), the epilogue by K (``TMA_STORE_K``);
    3. static or stream-K by the last wave (``fit_policy``);
    4. few tiles over short K: the thin tile again (``FEW_TILES_THIN``);
    5. just past a wave of 128-wide stream-K tiles, 192 wide (``_mid_tile_pays``); then fuller or
       cheaper static waves of another width (``_cheapest_waves``);
    6. B's rows off 128-byte lines, 128-wide stream-K just past one wave: one wave of static 192,
       final (``OFF_LINES_PAST_WAVE``); B's rows off 32-byte sectors: 192 wide in place of static
       128 (``OFF_ROWS_WIDTH``, ``OFF_ROWS_ONE_WAVE``);
    7. deep K over few 256-wide tiles: split-K on them (``_deep_split``), final;
    8. 128-wide tiles below 0.75 of a wave over long K: stream-K on 2 x 2 clusters
       (``_quad_streamk_pays``, ``quad_streamk``), static where stream-K saves few K steps
       (``_quad_static``), final; not where the rules below give a split of 128 x 192 tiles
       whose area the blocks pass by a fifth or more (``_quad_wider_split``);
    9. B's rows off 128-byte lines: static 2-CTA clusters (``_off_rows_clusters``; not a wave of
       single CTAs over odd tile rows that they only match, ``OFF_ROWS_ODD_TIE``), 2 x 2 where
       A's are too (``_off_rows_blocks``), stream-K over a many-wave tail (``_many_waves``);
    10. one wave of static 128 x 128 tiles: split-K on 192-wide ones (``_split_k_192``); two to
        four CTAs a stream-K tile: split-K (``_split_k``); static clusters with a short last
        wave over long K: stream-K over their last two waves (``_cluster_tail_sk``); one or two
        spread tiles: their halves on 1 x 2 clusters (``_paired_halves``); static 128 x 128 tiles
        of at most half a wave: 128 x 64 halves (``_half_wave_halves``);
    11. stream-K single CTAs over two or three tile rows, B's rows off 128-byte lines: static
        2 x 2 clusters of 128 x 256 where their last wave is at least half full (``ROWS_QUAD``,
        ``_rows_quad``);
    12. 192 wide becomes 160 where that takes as many tile columns (``_same_columns_160``).

    What ``gemm_parts`` then does with the config (a K-major copy of B, two launches over bands of
    rows, the transposed product) is ``route``'s.

    The tile: 128 wide when the 256-wide tiles would fill less than ``WIDE_WAVE_FILL`` of one wave
    of ``sms`` (stream-K would then split every tile and pay a fix-up for each, where the narrow
    tiles fill the SMs whole; from 0.9 of a wave on, the one wave of 256-wide tiles, static, was
    ahead of 128-wide ones on all nine shapes measured, RESULTS.md seventeenth session:
    1600x2352x4096 0.98 against 0.83, 2112x1600x16384 0.98 against 0.89) or when K is short (at
    most ``SHORT_K`` 64-wide steps: a tile's fixed costs, loads in flight and the epilogue,
    dominate, and narrow tiles halve them per CTA; at K of 5-8 steps the 256-wide tiles on 4
    stages with TMA stores were ahead in 7 of 12 runs on six sizes drawn as a user types them,
    fp16 and bf16, by up to 0.16 of cuBLAS (9680x6080x424 0.81 -> 0.96), level in one, behind in
    four by 0.01-0.02, and level or ahead on 4096x4096x512, 6144x6144x384 and 8192x8192x512; on a
    second draw ahead in 10 of 10 by 0.03-0.14, geomean 0.85 -> 0.92: RESULTS.md, forty-second
    session).  Otherwise the candidate with the fewest estimated SM-time units: whole waves times the tile area, the narrower tile
    charged 10 % for its lower reuse per loaded byte.  On the H200 (benchmarks/RESULTS.md, fifth
    session) the narrow tile was 1.0-1.3x the wide one on 896x2432x8192, 1024x2112x8192 and
    8192x8192x256 (two runs); the wide one wins at 4096³ and 8192³.  ``tile_n`` fixes the tile
    width (one of ``TILE_CHOICES``); the policy and fix-up are then chosen for it.

    Just past a wave of 128-wide stream-K tiles, float16 and bfloat16 take 128 x 192 tiles
    (``MID_TILE``) where ``_mid_tile_pays`` says so: 1024x2112x8192 0.88-0.90 of cuBLAS against
    0.73-0.82 (RESULTS.md, sixteenth session).  Then the static waves of the width that costs
    least, where they cost less than stream-K or than the chosen static waves
    (``_cheapest_waves``).

    At most 64 rows or 64 columns (``min(m, n) <= 64``), unless ``tile_n`` is given:
    ``THIN_TILE``, pingpong consumers on 64 x 64 tiles, where a 128 x 128 tile would load and
    multiply as many zeros as real rows (or columns) and split fewer tiles over the SMs.  On the
    H200 (RESULTS.md, eleventh session) this ran at 0.93-0.99 of cuBLAS on 64x8192x8192 against
    0.74-0.75 for the 128x128 stream-K tile, and ahead of it on every thin shape measured
    (8192x64x8192, 32x8192x8192, 16x8192x16384, 64x16384x4096, 48x4096x16384, 64x2048x8192).
    Float16 and bfloat16 thin products with more 64 x 64 tiles than SMs take them twice as long
    along the long side (``THIN_LONG``: 64 x 128 where M is thin, 128 x 64 where N is, on 8
    stages): on the H200 (RESULTS.md, fifty-first session, fp16, every launch cold) 32x16384x16384
    went from 0.83 to 0.95 of cuBLAS, 16x16384x16384 0.77 -> 0.92, 8x32768x8192 0.73 -> 0.86,
    48x16384x8192 0.92 -> 0.97 and 64x16384x16384 0.93 -> 0.97.  Not where the longer tiles run
    stream-K over K of fewer than ``THIN_LONG[2]`` 64-wide steps: on two draws of thin products
    (same session, fp16 and bf16) such launches were behind on 10768x11x928 (1.12 -> 0.96),
    32x25152x696 and 24840x16x544 by 0.03-0.08, level on 38088x32x752 and ahead by 0.01-0.05 on
    8x17304x376 and 25x26168x552; the static ones were ahead or level in every run, and those
    over longer K in all but two (by 0.01-0.03).  Where fewer than 64 rows make
    static 64 x 64 tiles fill one wave more than half, the 64 x 128 tiles split-K two ways
    (``THIN_LONG_SPLIT``, as many CTAs): on ten products drawn in that class (same session) ahead
    of the 64 x 64 tiles in 20 of 20 runs by 0.01-0.19 (31x8304x21896 0.82 -> 0.99); not at 64 rows,
    where 64x8192x8192 fell from 0.95 to 0.93 (0.98 -> 0.93 in the forty-ninth session).
    Not where stream-K would split each thin tile eight or more ways (few tiles, long K): the
    pingpong consumers have only the owner fix-up, and the cooperative tile's "spread" one is
    taken there (256x256x65536: 0.61-0.62 against 0.51-0.53 for 64 x 64 tiles split 8 ways).
    Float16 and bfloat16 products whose 128 x 128 tiles fill at most ``FEW_TILES_THIN[0]`` of the
    SMs, with K of at most ``FEW_TILES_THIN[1]`` 64-wide steps, take the thin tile too: four times
    the tiles to share out.  Where the 128 x 128 tiles run unsplit (``fit_policy``), with the same
    policy (RESULTS.md, nineteenth session, fp16, products of at most 128 rows or columns: ahead of
    the static 128 x 128 tiles on 12 of 13 shapes, by up to 0.22 of cuBLAS: 80x1392x2048 0.54 ->
    0.76, 112x1280x512 0.79 -> 0.95; behind by 0.01 on 3152x80x512; then on sixteen shapes drawn
    after the rule, fp16 and bf16, ahead in all 32 runs by 0.10-0.27, geomean 0.70 -> 0.88-0.89;
    twentieth session, wider products: 224x464x2048 0.56 -> 0.75, 976x304x2048 0.65 -> 0.81,
    256x1024x2048 0.62 -> 0.80, 384x640x1024 0.72 -> 0.88, 512x1024x1024 0.71 -> 0.84,
    640x768x512 0.78 -> 0.84).  Where they split (K of about 2600-4096), with the thin tile's own
    policy, unless that would split each thin tile eight or more ways (twentieth session, fp16:
    1232x80x4096 0.59 -> 0.72 split, 96x4000x4096 0.73 -> 0.93 static, 112x3000x4096 0.66 ->
    0.72, 512x512x4096 0.58 -> 0.67; from K = 8192 the split 128 x 128 tiles stayed ahead,
    e.g. 3000x112x16384 0.89 against 0.70).

    The epilogue: "tma" (bulk tensor stores, the warpgroup goes on to its next tile while they
    run) for K of at most ``TMA_STORE_K`` 64-wide steps, where writing the output is a large share
    of the work; "staged" (16-byte thread stores) for longer K.  On the H200 (RESULTS.md, thirteenth
    session, GPU time, fp16 / bf16) TMA stores were ahead by 7 % at 8192x8192x256, 4-5 % at K = 512,
    3-4 % at K = 1024, 1 % at K = 2048 and even at K = 4096, and within -3..+2 % at K >= 8192.
    Where K has at most ``FEW_STAGES_K[0]`` steps (one tile's whole K fits in 4 stages), the
    cooperative tile takes ``FEW_STAGES_K[1]`` stages: 2.5-7 % ahead of 6 at K = 256 (16384²,
    8192², 4096² outputs, same session), level at K = 512 and 1024.

    ``b_rows_off``: B is read in place with rows that do not start on 32-byte sectors
    (``b_rows_off``, the function; measured with B row-major): TMA's boxes then straddle 128-byte lines and sectors,
    and the L2 does 1.6-2.5x the work (RESULTS.md, twentieth session).  Float16 and bfloat16
    static 128 x 128 tiles over two waves or more take 128 x ``OFF_ROWS_WIDTH`` tiles then, which
    read fewer bytes of B per FLOP (fp16: 4096x4104x4096 0.70 -> 0.74 of cuBLAS, 8192x4104x4096
    0.67 -> 0.77, 2048x4104x4096 0.70 -> 0.75; then ten shapes drawn with N an odd multiple of 8,
    fp16 and bf16: ahead in 18 of 20 runs, by up to 0.09, level in one, behind by 0.01 in one).
    With rows on sectors but off 128 bytes (N a multiple of 16) the same change was ahead on
    3664x3824x7664 (0.70 -> 0.86) but level on average over six shapes drawn (1776x5648x1024 0.92
    -> 0.83), so those keep their tile.  (Where they cost no more, the clusters below then
    replace both.)  From ``OFF_ROWS_ONE_WAVE`` (0.75) of a wave up to one wave, where the wider tiles
    fit in one wave too and the clusters below would not take the 128-wide ones, the wider tiles
    are final: on narrow-M products of 105-130 such tiles, 128 x 192 ran ahead in 14 of 17 runs
    by 0.02-0.11 of cuBLAS (RESULTS.md, forty-fourth session: 592x3288x8104 0.74 -> 0.85), level
    in one, behind by 0.01-0.02 in two, while the clusters, which would take 192's waves at their
    margin, ran behind.  ``one_wave=False`` leaves this rule out: the transposed product's config
    that ``swap_pays`` weighs and ``tail_split``'s rest band are picked so, since the wave model
    prices the wider tiles above the ones they replace.

    Just past one wave (up to ``OFF_LINES_PAST_WAVE`` waves) of 128-wide stream-K tiles, with B's
    rows off 128-byte lines (on sectors or not; ``b_rows_off_128``) and the 192-wide tiles in one
    wave, those are final too, static (``_past_wave_192``; ``one_wave=False`` leaves it out as
    well): stream-K there splits nearly every 128 x 128 tile.  On the H100 (RESULTS.md,
    seventy-fifth session, fp16 and bf16) static 192 ran ahead in 20 of 20 runs on chosen sizes
    (0.667 -> 0.780 and 0.650 -> 0.735 of cuBLAS) and in 18 of 20 on ten sizes drawn after (0.741
    -> 0.866, 0.736 -> 0.855), behind only where B may be copied K-major, which it leaves out; on
    eight drawn after that and the swap's pricing, in 16 of 16 (0.707 -> 0.825 and 0.828).
    With B's rows on lines, one wave of 192 lost there (seventeenth session, above).

    ``b_rows_off_128``: B is read in place with rows that do not start on 128-byte lines (the
    rows of N of a row-major B, or of K of a column-major one: ``b_rows_off(b_parts, 128)``;
    implied by ``b_rows_off``).  Last, float16 and bfloat16
    cooperative configs become 2-CTA clusters that multicast B, static, 128 or 256 wide, where
    their cluster waves cost no more than the config chosen so far (``OFF_ROWS_CLUSTERS``,
    ``_off_rows_clusters``): the L2 those rows overload reads half of B.  On the H200 (RESULTS.md,
    twenty-second session, fp16, 21 shapes with N off 64 elements, the rule fitted to them) it
    switched 16 of them, ahead on 14 (4096x4104x4096 0.72 -> 0.90 of cuBLAS, 1328x7192x8440 0.63
    -> 0.95, 4720x4296x1176 0.72 -> 0.96, 5000³ 0.64 -> 0.82) and behind on two (6192x1696x10592
    0.94 -> 0.86, 5056x1360x2224 0.96 -> 0.95); geomean over the 21 1.19x the heuristic before.
    Then on 16 shapes drawn after it, fp16 and bf16: it switched 8, ahead in 14 of 16 runs by
    0.11-0.29 (2784x6056x11536 0.72-0.75 -> 0.98-0.99), behind by 0.01 in two (2864x1200x9472).
    Where B's rows are off 32-byte sectors too (``b_rows_off``), the clusters may cost up to
    ``OFF_ROWS_CLUSTER_MARGIN[0]`` (1.2) times the config: such rows cost one CTA per tile more
    (2640x2296x12344: 192 static 0.59, clusters 0.63-0.80); on 14 shapes drawn where only that
    margin makes the difference, fp16 and bf16: ahead in 28 of 28 runs, geomean 0.61-0.62 ->
    0.73-0.74 (5584x424x5208 0.62-0.63 -> 0.89, 1616x3640x9416 0.72-0.73 -> 0.91-0.95).  A
    column-major B whose K is off 64 elements is read the same way: on ten shapes drawn, fp16, the
    rule switched nine, ahead on all nine, geomean 0.67 -> 0.86 (5952x2768x7896 0.67 -> 0.97).

    Narrow products (at most ``NARROW_N`` columns) whose B rows are on 32-byte sectors take a static
    ``NARROW_WIDTHS`` tile instead of those clusters where its waves cost less than theirs and the
    config's: the clusters' 128- and 256-wide tiles pad their few tile columns (N = 560: three
    columns of 256 for 560).  On the H200 (RESULTS.md, twenty-fifth session, 17 such shapes, fp16
    and bf16): 192 wide 0.50-0.70 -> 0.77-0.92 of cuBLAS where the clusters were 256 wide
    (13576x544x2032, 14656x560x752), 160 wide ahead by 0.04-0.13 at K up to 800 but 0.01 and
    0.09 behind at K = 4696 and 15040, which keep their clusters.  Then on 16 shapes drawn after
    the rule: fp16 0.67 -> 0.78, bf16 0.67 -> 0.78 (geomean), ahead in 29 of 32 runs
    (16120x560x720 0.63 -> 0.90, 13904x528x6072 0.49 -> 0.69), behind by 0.03-0.05 on 7352x752x680.

    ``b_row_major``: B is read in place row-major (``b_rows_flags``).  Its tiles then load whole
    64-wide boxes, so a 224-wide tile loads 256 columns, and every other tile column starts off a
    128-byte line: from K of ``ROW_MAJOR_BOXES_MIN_K`` steps, where 224 needs more tile columns
    than 256, the cheapest waves and the narrow widths above take the next cheapest width instead
    where that is 192 or 256 (``ROW_MAJOR_BOXES``, ``_boxes_pick``).  A B read K-major (the
    transposed product's, a column-major one, the copy) loads the tile's columns alone.

    ``a_rows_off_128``: A is read in place with rows off 128-byte lines too (the rows of K of a
    row-major A, or of M of a column-major one).  Where the rule above took 2-CTA clusters, they
    become 2 x 2 clusters of the same width (``_off_rows_blocks``), which multicast A along the
    tile row as well, where the blocks need no more waves (30 4-CTA clusters fit on an H200), at
    most ``BLOCK_PAD`` of their CTAs sit past N, and, 256 wide (``SPLIT_OVER_BLOCKS``), the 2-CTA
    launch would not be split in two (``tail_split``, which was ahead of one 256-wide 2 x 2 launch
    on all five shapes timed).  On the H200 (RESULTS.md, twenty-fourth session): on 14 shapes
    drawn after the rule, fp16 0.81 -> 0.86 and bf16 0.82 -> 0.88 of cuBLAS (3520x424x11560 0.61
    -> 0.85, 488x3488x3560 0.73 -> 0.92), ahead in 23 of 28 runs, behind by 0.01-0.03 in three
    (5480x2352x352 0.86 -> 0.83).  128 wide, 2 x 2 clusters were ahead of the two launches on ten
    of eleven shapes (twenty-sixth session, fp16: 2760x1704x5304 0.53 -> 0.71, 1536x2920x4328
    0.53 -> 0.70), level on one, so there they replace the split.

    16-bit products run on 128 x 128 tiles, one CTA per tile, below 0.75 of a wave with K of 4096
    or more, take stream-K over 2 x 2 blocks of tiles and 4-CTA clusters that multicast A and B
    (``QUAD_SK``, ``_quad_streamk_pays``): on 18 shapes drawn after the rule (RESULTS.md,
    thirty-first session), 0.69-0.82 -> 0.86-0.92 of cuBLAS on the geometric means, ahead in 33
    of 36 runs (1144x704x36376 0.77 -> 1.24).  Rows of B off 128 bytes take them too, before the
    off-rows rules: on 8 such shapes drawn in the class, ahead in 14 of 16 runs and level (within
    0.01) in two, against stream-K (1752x416x37456 0.51 -> 0.83) and against the off-rows rules'
    static clusters (2272x456x6784 0.93 -> 1.03).

    Deep-K products whose 128 x 256 tiles a wave holds 3 to 8 CTAs of, each a k-slice of 96 or
    more 64-wide steps, run split-K on those tiles with the spread fix-up, on 2 x 1 clusters that
    multicast B where its rows are off 128-byte lines (``DEEP_SPLIT``, ``_deep_split``), ahead of
    the rules below: on twelve products drawn in that class (RESULTS.md, fifty-second session)
    fp16 0.793 -> 0.925, bf16 0.791 -> 0.924 of cuBLAS, ahead in 23 of 24 runs, level in one; on
    twelve more (after the padding bound) 0.759 -> 0.822 and 0.748 -> 0.805, ahead in 15 of 24,
    behind in six, all on odd tile rows over B's rows off the lines, which then took the clusters
    from nine rows (``DEEP_SPLIT_ODD_ROWS``: ten drawn after it, 0.754 -> 0.835 and 0.737 -> 0.839
    against single CTAs there, ahead in 17 of 20 runs, behind by 0.02 in two).  Fewer tiles, 9 to
    16 CTAs each, take the split on those clusters only (``DEEP_SPLIT_FEW``): on eight drawn after
    the rule fp16 0.689 -> 0.902, bf16 0.668 -> 0.897, and on seven more after ``swap_pays`` kept
    such splits 0.680 -> 0.860 and 0.691 -> 0.892 (28 of 30 runs ahead).

    Where a wave holds two to four CTAs a 128 x 128 stream-K tile (one CTA each), split-K runs
    instead (``SPLIT_K``, ``_split_k``): that many CTAs a tile, each one equal k-slice, all
    slices read in step, the owner fix-up; in place of the 2 x 2 clusters too where A's and B's
    rows are on 128-byte lines; in place of such static tiles from K of ``SPLIT_K_FROM_STATIC``
    steps; and on the thin pingpong tiles' stream-K (``SPLIT_K_THIN``).  On the H200 (RESULTS.md,
    forty-eighth session) on 18 sizes drawn as a user types them after the rule: fp16 0.720 ->
    0.816, bf16 0.690 -> 0.765 of cuBLAS, ahead in 18 of 18 runs.  Stream-K with the spread
    fix-up on one or two such tiles runs on their 128 x 64 halves, paired on 1 x 2 clusters that
    multicast A (``PAIRED_HALVES``, ``_paired_halves``): on 13 such products (forty-ninth
    session) fp16 0.603 -> 0.678, bf16 0.604 -> 0.687, ahead in 26 of 26 runs.  Static 128 x 128
    tiles that fill at most half a wave run as 128 x 64 tiles, twice the CTAs, on 1 x 2 clusters
    where they ran on clusters (``HALF_WAVE_HALVES``, ``_half_wave_halves``): on 14 products drawn
    where that fires on single CTAs (fiftieth session), fp16 0.748 -> 0.807, bf16 0.756 -> 0.810 of
    cuBLAS; on 16 over clusters, fp16 0.724 -> 0.763, bf16 0.750 -> 0.797.

    Static 2 x 1 and 2 x 2 clusters over more than one wave of their blocks, whose last wave leaves
    the average cluster below 0.9 of the busiest one's blocks, over K of more than 32 steps, run
    stream-K over their last two waves on the same clusters (``CLUSTER_TAIL_SK``,
    ``_cluster_tail_sk``): on 24 products whose launch it changes, as callers got them (RESULTS.md,
    fifty-fourth session), fp16, ahead on 20 by 0.02-0.15 and level on four (1239x6808x15048 0.90
    -> 1.05; 14128x536x5920 0.69 -> 0.84, transposed now that no tail split comes first); bf16 on
    17, ahead on 15, level on two.

    16-bit products left on stream-K over single CTAs of 128 x 192 or 128 x 256 tiles in two or
    three tile rows, with B's rows off 128-byte lines, run static 128 x 256 tiles on 2 x 2
    clusters that multicast A and B where the clusters' last (or only) wave is at least half full
    (``ROWS_QUAD``, ``_rows_quad``): on the H100 (RESULTS.md, eighty-eighth session) on twelve
    sizes drawn at three rows, ahead in 20 of 24 runs (fp16 296x13008x3976 0.50 -> 0.62,
    328x13192x1816 0.68 -> 0.84), within 0.02 in two (336x6448x14080), behind in two on
    312x8520x2712 (0.80 -> 0.61), whose second wave of clusters held four of 30, which the bound
    now leaves; on four at two rows ahead in all four (fp16, 0.70 -> 0.93).  Then on sixteen sizes
    drawn after at two and three rows: ahead in 28 of 32 runs, geomean fp16 0.722 -> 0.814, bf16
    0.715 -> 0.813 (216x8712x9552 bf16 0.63 -> 0.75); behind in four on the two whose config was
    128 x 128 stream-K (360x11600x3792 0.81 -> 0.69), which the rule leaves since (not measured
    after that change).

    Last, 192-wide tiles (one CTA per tile, the staged epilogue) become 160 wide where those take
    as many tile columns (``SAME_COLUMNS_160``, ``_same_columns_160``): the same tile grid, waves
    and policy, a sixth fewer columns multiplied.  On the H200 (RESULTS.md, thirty-third session,
    fp16, N of 272-304): ahead on 5 of 6 shapes by 0.01-0.10 of cuBLAS (6376x304x12168 0.95 ->
    1.05), level on one.

    >>> cfg = choose_config(1152, 1024, 16384, "float16", 132)  # 72 tiles
    >>> cfg.policy, cfg.cluster_m, cfg.cluster_n
    ('streamk', 2, 2)
    >>> cfg = choose_config(768, 1024, 16384, "float16", 132)  # 48 tiles: split-K two ways
    >>> cfg.policy, cfg.cluster_m, cfg.sk_ways
    ('streamk', 1, 2)
    >>> cfg = choose_config(128, 128, 131072, "float16", 132)  # one tile: its halves, paired
    >>> cfg.tile_n, cfg.cluster_n, cfg.sk_reduce
    (64, 2, 'spread')
    >>> choose_config(8192, 8192, 8192, "bfloat16", 132).tile_n
    256
    >>> choose_config(4096, 4104, 4096, "float16", 132).tile_n
    128
    >>> cfg = choose_config(4096, 4104, 4096, "float16", 132, b_rows_off=True)
    >>> cfg.tile_n, cfg.cluster_m  # 128 x 192 first, then clusters of 128 x 128 cost no more
    (128, 2)
    >>> cfg = choose_config(64, 8192, 8192, "float16", 132)
    >>> (cfg.tile_m, cfg.tile_n, cfg.pingpong, cfg.policy)
    (64, 64, True, 'static')
    """
    cfg = _choose_config(m, n, k, dtype, sms, allow_tf32=allow_tf32, shared=shared, tile_n=tile_n,
                         b_rows_off=b_rows_off, b_rows_off_128=b_rows_off_128, a_rows_off_128=a_rows_off_128,
                         one_wave=one_wave, b_row_major=b_row_major)
    return cfg if tile_n is not None else _same_columns_160(cfg, n)


def _choose_config(m: int, n: int, k: int, dtype: str, sms: int, *, allow_tf32: bool = False,
                   shared: bool = False, tile_n: int | None = None, b_rows_off: bool = False,
                   b_rows_off_128: bool = False, a_rows_off_128: bool = False,
                   one_wave: bool = True, quad: bool = True, b_row_major: bool = False) -> HopperConfig:
    """``choose_config`` without its last rule (``_same_columns_160``); ``quad=False``: without
    the 2 x 2 clusters' rule (``_quad_streamk_pays``) too."""
    kind = input_kind(dtype, allow_tf32)
    explicit = tile_n is not None
    if tile_n is not None and tile_n not in dict(TILE_CHOICES):
        raise ValueError(f"tile_n must be one of {[t for t, _ in TILE_CHOICES]}, got {tile_n}")
    steps = -(-k // 64)  # K in 64-wide steps
    epilogue = "tma" if steps <= TMA_STORE_K else "staged"
    tm, tn, st = THIN_TILE
    if tile_n is None and min(m, n) <= tm:
        thin = _thin_config(HopperConfig(input=kind, tile_m=tm, tile_n=tn, stages=st, pingpong=True,
                                         epilogue=epilogue), m, n, k, sms, shared)
        if not (thin.policy == "streamk" and sms >= 8 * _tiles(m, n, tn, tm)):
            return thin if shared else _split_k(thin, m, n, k, sms)
    if tile_n is None:
        if _tiles(m, n, TILE_CHOICES[0][0]) < WIDE_WAVE_FILL * sms or steps <= SHORT_K:
            tile_n = TILE_CHOICES[1][0]
    best = None
    for rank, (width, stages) in enumerate(TILE_CHOICES):
        if tile_n is not None and width != tile_n:
            continue
        cost = _waves(m, n, width, sms) * TILE_M * width / (1.0 - 0.1 * rank)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, width, stages)
    _, tile_n, stages = best
    if steps <= FEW_STAGES_K[0]:
        stages = min(stages, FEW_STAGES_K[1])
    # the staged epilogue: 0.96 of cuBLAS at 4096³ against 0.88 for the paired stores (H200)
    cfg = fit_policy(HopperConfig(input=kind, tile_n=tile_n, stages=stages, epilogue=epilogue),
                     m, n, k, sms, shared=shared)
    if (not explicit and kind in ("float16", "bfloat16") and steps <= FEW_TILES_THIN[1]
            and _tiles(m, n, 128) <= FEW_TILES_THIN[0] * sms):
        thin = HopperConfig(input=kind, tile_m=tm, tile_n=tn, stages=st, pingpong=True, epilogue=epilogue)
        if cfg.policy != "streamk":
            return thin.replace(policy=cfg.policy)
        if FEW_TILES_THIN[2] and 8 * _tiles(m, n, tn, tm) > sms:
            return fit_policy(thin, m, n, k, sms, shared=shared)
    if not explicit and kind in ("float16", "bfloat16") and _mid_tile_pays(cfg, m, n, k, sms):
        width, stages = MID_TILE
        cfg = fit_policy(cfg.replace(tile_n=width, stages=stages), m, n, k, sms, shared=shared)
    if not explicit and not shared and kind in ("float16", "bfloat16"):
        cfg = _cheapest_waves(cfg, m, n, k, sms, b_row_major)
        cfg = _streamk_256(cfg, m, n, k, sms)
    if (one_wave and b_rows_off_128 and not explicit and not shared and kind in ("float16", "bfloat16")
            and _past_wave_192(cfg, m, n, k, sms)):
        return _static_width(cfg, MID_TILE[0], MID_TILE[1], k)  # one wave of 192: final
    if (b_rows_off and OFF_ROWS_WIDTH and not explicit and not shared and kind in ("float16", "bfloat16")
            and not cfg.pingpong and cfg.tile_n == 128 and cfg.policy == "static"):
        wide = _static_width(cfg, OFF_ROWS_WIDTH, dict(CHEAPEST_WIDTHS)[OFF_ROWS_WIDTH], k)
        if _tiles(m, n, 128) >= 2 * sms:
            cfg = wide
        elif (one_wave and OFF_ROWS_ONE_WAVE is not None and OFF_ROWS_ONE_WAVE * sms <= _tiles(m, n, 128) <= sms
              and _tiles(m, n, OFF_ROWS_WIDTH) <= sms
              and _off_rows_clusters(cfg, m, n, k, sms, OFF_ROWS_CLUSTER_MARGIN[0], on_sectors=False,
                                 b_row_major=b_row_major) == cfg):
            return wide  # one wave either way: the wider tiles, on single CTAs (not the clusters below)
    if not (explicit or shared) and kind in ("float16", "bfloat16"):
        deep = _deep_split(cfg, m, n, k, sms, b_rows_off or b_rows_off_128)
        if deep is not None:
            return deep
    if (quad and not (explicit or shared) and kind in ("float16", "bfloat16")
            and _quad_streamk_pays(cfg, m, n, k, sms)
            and (a_rows_off_128 or b_rows_off or b_rows_off_128  # split-K first on lines: _split_k
                 or not _split_k(cfg, m, n, k, sms).sk_ways)):
        if QUAD_SK_192_PAD is not None:
            other = _choose_config(m, n, k, dtype, sms, allow_tf32=allow_tf32, b_rows_off=b_rows_off,
                                   b_rows_off_128=b_rows_off_128, a_rows_off_128=a_rows_off_128,
                                   one_wave=one_wave, quad=False, b_row_major=b_row_major)
            if _quad_wider_split(other, m, n):
                return other
        blocks = quad_streamk(cfg, m, n, k, sms)  # ahead of the off-rows clusters too (RESULTS.md)
        return _quad_static(blocks, m, n, k, sms) if one_wave else blocks
    if ((b_rows_off or b_rows_off_128) and not explicit and not shared
            and kind in ("float16", "bfloat16")):
        cfg = _off_rows_clusters(cfg, m, n, k, sms, OFF_ROWS_CLUSTER_MARGIN[0 if b_rows_off else 1],
                                 on_sectors=not b_rows_off, b_row_major=b_row_major)
        if a_rows_off_128:
            cfg = _streamk_256_blocks(_off_rows_blocks(cfg, m, n, k, kind, sms, b_rows_off=b_rows_off,
                                                       b_rows_off_128=b_rows_off_128, b_row_major=b_row_major),
                                      m, n, k, sms)
        cfg = _many_waves(cfg, m, n, k, sms)
    if explicit or shared:
        return cfg
    cfg = _cluster_tail_sk(_split_k(_split_k_192(cfg, m, n, k, sms), m, n, k, sms), m, n, k, sms)
    cfg = _half_wave_halves(_paired_halves(cfg, m, n), m, n, sms)
    off = b_rows_off or b_rows_off_128
    return _rows_quad(cfg, m, n, k, sms) if one_wave and off and kind in ("float16", "bfloat16") else cfg


def _rows_quad(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or static 128 x 256 tiles on 2 x 2 clusters where ``cfg`` is stream-K over single
    cooperative CTAs of 128 x 192 or wider tiles, neither split-K nor halves, over a number of
    tile rows in ``ROWS_QUAD[0]``, unless the last (or only) wave of the clusters' blocks holds
    less than ``ROWS_QUAD[1]`` of the ``quad_clusters`` a wave holds (``choose_config`` calls it
    for B's rows off 128-byte lines only).

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, policy="streamk", epilogue="tma")
    >>> q = _rows_quad(cfg, 288, 12968, 1800, 132)  # 2 x 26 blocks: 1.73 waves of 30
    >>> q.tile_n, q.stages, q.policy, q.cluster_m, q.cluster_n, q.epilogue
    (256, 4, 'static', 2, 2, 'tma')
    >>> _rows_quad(cfg, 312, 8520, 2712, 132) == cfg  # 2 x 17 blocks: a second wave of four
    True
    >>> _rows_quad(cfg, 600, 8304, 1800, 132) == cfg  # five rows of tiles
    True
    >>> _rows_quad(cfg, 208, 1448, 121888, 132) == cfg  # 1 x 3 blocks: a tenth of a wave
    True
    >>> _rows_quad(cfg.replace(tile_n=128, stages=6), 360, 11600, 3792, 132).tile_n  # 128 wide
    128
    >>> _rows_quad(cfg.replace(policy="static"), 288, 12968, 1800, 132).policy
    'static'
    """
    rows = -(-m // TILE_M)
    if (not ROWS_QUAD or cfg.policy != "streamk" or cfg.pingpong or cfg.tile_m != TILE_M
            or cfg.tile_n < 192 or cfg.cluster_size != 1 or cfg.sk_ways or rows not in ROWS_QUAD[0]):
        return cfg
    blocks, slots = _quad_block_count(rows, -(-n // 256)), quad_clusters(sms)
    if blocks % slots and blocks % slots < ROWS_QUAD[1] * slots:
        return cfg
    return _static_width(cfg, 256, 4, k).replace(cluster_m=2, cluster_n=2)


def _split_k_192(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or where ``SPLIT_K_192`` holds (16-bit, static cooperative 128 x 128 tiles of one
    wave that holds one CTA a tile, K of at least ``SPLIT_K_192[0]`` 64-wide steps, and
    ``SPLIT_K_192[1]`` CTAs a tile of 128 x 192 tiles fitting ``sms``): split-K on 128 x 192 tiles,
    that many CTAs a tile, each one equal k-slice, one CTA per tile, the owner fix-up.  Such a
    product leaves the SMs past its tiles idle while each CTA runs a long K; the wider tiles' split
    puts twice as many CTAs on fewer, wider tiles, each over half the K.

    On the H200 (RESULTS.md, fifty-third session, fp16, × cuBLAS), against the heuristic's static
    128 x 128 tiles (single CTAs, 2 x 1 or 2 x 2 clusters), on 15 products of 66-131 such tiles:
    from K = 8152 ahead on 9 of 10 by 0.02-0.26 (278x3928x22376 0.48 -> 0.74, 301x3792x15784
    0.57 -> 0.77, 567x1864x16616 0.64 -> 0.74), behind on 1584x784x10664 by 0.03; at K of
    5856-7792 ahead on two, behind on three by 0.06-0.13 (664x2088x6224 1.03 -> 0.90).  Where the
    heuristic ran stream-K over 2 x 2 clusters instead it lost on three of four (not taken there).
    Then as a caller gets it, fp16 and bf16, on ten products drawn where it fired and two that the
    cluster rules' tests pin: ahead in 18 of 24 runs by 0.02-0.30 (552x2080x21512 0.53-0.58 ->
    0.80, 1408x1072x16384 0.63-0.78 -> 0.93-1.01), level in two; behind by 0.07-0.17 in four, on
    the two products that ``gemm_parts`` had run transposed on the deep split (3216x360x26904
    0.91 -> 0.84, 2954x296x33432 1.31 -> 1.16), which the split now leaves alone: not where
    ``swap_pays`` would run the product transposed on ``_deep_split``'s tiles.  On two draws after
    (fp16): ahead on 7 of 8 by 0.11-0.45 (576x2776x53152 0.54 -> 0.99), behind on 3787x344x15424
    by 0.06; and on ten sizes drawn as a user types them, ahead on seven by 0.02-0.37
    (304x2928x12432 0.62 -> 0.99), behind on three by 0.08-0.09, each from 1.10-1.18 of cuBLAS.

    >>> cfg = HopperConfig(input="float16", tile_n=128, stages=6, epilogue="staged", cluster_m=2, cluster_n=2)
    >>> c = _split_k_192(cfg, 278, 3928, 22376, 132)
    >>> c.tile_n, c.stages, c.policy, c.sk_ways, c.sk_reduce, c.cluster_size
    (192, 4, 'streamk', 2, 'owner', 1)
    >>> _split_k_192(cfg, 664, 2088, 6224, 132) == cfg  # K short of 128 steps
    True
    >>> _split_k_192(cfg.replace(policy="streamk"), 278, 3928, 22376, 132) == cfg.replace(policy="streamk")
    True
    >>> _split_k_192(cfg, 1000, 1000, 22376, 132) == cfg  # 64 tiles: a wave holds two CTAs a tile
    True
    """
    if (SPLIT_K_192 is None or cfg.input not in ("float16", "bfloat16") or cfg.pingpong
            or cfg.tile_m != TILE_M or cfg.tile_n != 128 or cfg.policy != "static" or cfg.sk_ways
            or -(-k // 64) < SPLIT_K_192[0]):
        return cfg
    tiles, ways = _tiles(m, n, 128), SPLIT_K_192[1]
    if not sms // 2 < tiles <= sms or ways * _tiles(m, n, 192) > sms:
        return cfg
    deep = _deep_split(cfg, n, m, k, sms, False)
    if deep is not None and swap_pays(cfg, deep, m, n):
        return cfg  # the transposed product's deep split, which gemm_parts then runs (measured ahead)
    return cfg.replace(tile_n=192, stages=dict(CHEAPEST_WIDTHS)[192], policy="streamk", cluster_m=1,
                       cluster_n=1, sk_ways=ways, sk_reduce="owner", sk_waves=1, epilogue="staged")


def _cluster_tail_sk(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or where ``CLUSTER_TAIL_SK`` holds (16-bit static cooperative tiles on 2 x 1 or
    2 x 2 clusters, more blocks than one wave's clusters, the blocks of the last wave leaving the
    average cluster below ``CLUSTER_TAIL_SK[0]`` of the busiest one's, K of at least
    ``CLUSTER_TAIL_SK[1]`` 64-wide steps past two waves of blocks and ``CLUSTER_TAIL_SK[2]`` at two
    or fewer, or ``CLUSTER_TAIL_SK[1]`` there with the average below ``CLUSTER_TAIL_SK[3]``, the
    staged epilogue): stream-K over the last two waves on the same tiles and
    clusters (``sk_waves=1``), the owner fix-up.  The off-rows rules pick such static clusters by
    whole waves; a last wave of a few blocks then costs a whole wave's time on long K.  Not over
    the TMA-store epilogue (K of at most ``TMA_STORE_K`` steps, 32: the rule's lowest), where
    stream-K over clusters was neither measured nor tested on the GPU.

    On the H200 (RESULTS.md, fifty-fourth session, fp16, × cuBLAS), as callers got them (where
    ``gemm_parts`` had split the static launch in two bands of rows, ``tail_split``, against those):
    on ten products of 2.05-2.64 waves of blocks over 35-251 steps, ahead on nine by 0.02-0.15
    (1239x6808x15048 0.90 -> 1.05, 9040x456x10120 0.74 -> 0.83, 3906x2120x16040 1.10 -> 1.17),
    level on one; on a draw of 24 static cluster launches, ahead on five of the seven in the class
    by 0.03-0.09 (7696x2640x12904, 5.2 waves, 0.81 -> 0.90), level on two; outside it, from 0.9 of
    the busiest cluster's blocks or below 32 steps, behind on eight by 0.02-0.11 (619x15976x1312
    0.85 -> 0.74, 1244x5624x2000 0.85 -> 0.77), level on six, ahead on three by 0.03-0.04.
    Then (fifty-eighth session, three draws): past two waves ahead on ten of fourteen by
    0.02-0.09, level on two, behind on two by 0.02-0.03.  At two waves or fewer (1.70-1.73) it
    depended on K: behind on all six products of 33-83 steps by 0.03-0.10 (9568x728x2056 0.90 ->
    0.80), ahead on three of five of 105-215 steps by 0.02-0.13 (2832x2072x6736 0.83 -> 0.96),
    behind by 0.02 on one, level on one.  So from 96 steps there (fitted on those eleven).  A
    draw of its own (fifty-ninth session) found the fill deciding below 96 steps: with the
    average cluster at 0.76-0.80 of the busiest one's blocks (1.52-1.59 waves) ahead on three of
    four by 0.03-0.07 (2416x2552x3024 0.79 -> 0.86), level on one; at 0.85-0.87 behind on two of
    four by 0.03-0.04, level on two.  Of the eighteen such products measured at two waves or
    fewer, below 96 steps the twelve from 0.82 favoured static or were level, the four below
    0.8 stream-K or level.  So from 32 steps there too where the fill is below
    ``CLUSTER_TAIL_SK[3]``; on a draw of that class (1.52-1.59 waves, 36-89 steps) ahead on 13 of
    16 runs by 0.03-0.16, level on two, behind by 0.02 on one (geomean fp16 0.87 -> 0.93,
    5160x1168x5664 0.80 -> 0.88).

    >>> cfg = HopperConfig(input="float16", tile_n=256, stages=4, epilogue="staged", cluster_m=2)
    >>> c = _cluster_tail_sk(cfg, 1239, 6808, 15048, 132)  # 135 blocks over 66 clusters
    >>> c.policy, c.sk_waves, c.sk_reduce, c.cluster_m
    ('streamk', 1, 'owner', 2)
    >>> _cluster_tail_sk(cfg, 1239, 6808, 1200, 132) == cfg  # K of 19 steps
    True
    >>> _cluster_tail_sk(cfg.replace(epilogue="tma"), 1912, 3240, 2048, 132).policy  # TMA stores
    'static'
    >>> _cluster_tail_sk(cfg, 1312, 8192, 15048, 132) == cfg  # 132 blocks: two whole waves
    True
    >>> _cluster_tail_sk(cfg, 9568, 728, 2056, 132) == cfg  # 114 blocks, 1.73 waves, 33 steps
    True
    >>> _cluster_tail_sk(cfg, 9568, 728, 6144, 132).policy  # ... over 96 steps
    'streamk'
    >>> _cluster_tail_sk(cfg, 2416, 2552, 3024, 132).policy  # 100 blocks, 1.52 waves, 48 steps
    'streamk'
    """
    if (CLUSTER_TAIL_SK is None or cfg.input not in ("float16", "bfloat16") or cfg.pingpong
            or cfg.policy != "static" or cfg.cluster_size == 1 or cfg.epilogue == "tma"):
        return cfg
    blocks, slots, steps = _block_waves(cfg, m, n, k, sms)
    fill, min_steps, long_k, short_fill = CLUSTER_TAIL_SK
    # two waves or fewer over shorter K: the fill that lets stream-K in is short_fill
    limit = short_fill if blocks <= 2 * slots and steps < long_k else fill
    if blocks <= slots or steps < min_steps or blocks >= limit * -(-blocks // slots) * slots:
        return cfg
    return cfg.replace(policy="streamk", sk_waves=1, sk_reduce="owner")


def _half_wave_halves(cfg: HopperConfig, m: int, n: int, sms: int) -> HopperConfig:
    """``cfg``, or, where it runs 16-bit 128 x 128 tiles in one wave of at most
    ``HALF_WAVE_HALVES`` of ``sms``, static (or one CTA a tile) on single cooperative CTAs, the same
    over 128 x 64 tiles on eight stages: twice the CTAs, each half the columns, still one wave.
    (Those products have too short a K for the heuristic to split it.)  Not where M fills one row
    of tiles.  Where ``cfg`` runs 2 x 1 or 2 x 2 clusters (``HALF_WAVE_CLUSTERS``: rows off
    128-byte lines), the halves of a tile pair on 1 x 2 clusters that multicast A; 2 x 1 clusters,
    which multicast B, stay where N > 2 M.  On single CTAs where N > M, the tiles are halved
    along M instead, 64 x 128 (``HALF_WAVE_ALONG_M``).

    On the H200 (RESULTS.md, fiftieth session, × cuBLAS as a caller gets it, every launch cold,
    against the rule off): fitted on three products (1024x1024x1024 0.81 -> 0.91, 2048x512x2048 and
    512x2048x2048 0.74 -> 0.83); on 14 drawn where it fired, fp16 0.748 -> 0.807 and bf16 0.756 ->
    0.810: ahead in 21 of 28 runs by 0.02-0.11 and level in four.  Behind in three: on
    72x5760x1560 (0.74 -> 0.68, bf16 0.79 -> 0.69), whence the one row of tiles left out, and on
    784x896x1176 in bf16 (0.80 -> 0.75).  Over clusters, fp16, the same way: fitted on 13 products
    (ahead on nine by 0.02-0.10, 1600x544x1952 0.84 -> 0.94; level on two; behind on
    1352x696x4024, 0.85 -> 0.80, and 6752x88x1568, 0.78 -> 0.76); then on 16 drawn where it
    fired, fp16 0.724 -> 0.763 and bf16 0.750 -> 0.797, ahead in 25 of 32 runs, behind in four:
    160x3744x3520 (0.69 -> 0.55, bf16 0.67 -> 0.57), whence N > 2 M left out, and 2568x296x2416
    (0.77 -> 0.71, bf16 0.86 -> 0.83).  A second draw after both refinements: over clusters ahead
    in 14 of 14 runs (fp16 0.750 -> 0.829, bf16 0.780 -> 0.842); on single CTAs ahead in 4 of 10,
    behind in five (528x1600x2344 0.80 -> 0.65): over both draws' 17 single-CTA products fp16
    0.747 -> 0.792, bf16 0.754 -> 0.799, ahead in 25 of 34 runs, behind in six.  Halved along M
    where N > M: as fast or faster on the seven such products measured (fitted; 528x1600x2344 0.66
    -> 0.81, 160x2432x2088 0.64 -> 0.79), then on ten drawn after it ahead of no halves in 20 of
    20 runs (fp16 0.757 -> 0.852, bf16 0.773 -> 0.865) and of 128 x 64 halves in eight, level in
    ten, behind in two by 0.02 (fp16 0.819 -> 0.852, bf16 0.835 -> 0.865).

    >>> static = HopperConfig(input="float16", tile_n=128, stages=6, epilogue="tma")
    >>> c = _half_wave_halves(static, 1024, 1024, 132)  # 64 tiles: 128 halves
    >>> c.tile_m, c.tile_n, c.stages
    (128, 64, 8)
    >>> c = _half_wave_halves(static, 512, 2048, 132)  # N > M: halved along M
    >>> c.tile_m, c.tile_n, c.stages
    (64, 128, 8)
    >>> _half_wave_halves(static, 1024, 2048, 132).tile_n  # 128 tiles: most of a wave already
    128
    >>> c = _half_wave_halves(static.replace(cluster_m=2, cluster_n=2), 1000, 1000, 132)
    >>> c.tile_n, c.cluster_m, c.cluster_n
    (64, 1, 2)
    >>> _half_wave_halves(static.replace(cluster_m=2), 160, 3744, 132).tile_n  # B multicast stays
    128
    """
    tiles = _tiles(m, n, 128)
    if (HALF_WAVE_HALVES is None or m <= TILE_M or cfg.input not in ("float16", "bfloat16")
            or cfg.policy not in ("static", "per_tile") or cfg.tile_n != 128 or cfg.tile_m != TILE_M
            or cfg.pingpong or tiles > min(HALF_WAVE_HALVES, 0.5) * sms  # the halves: one wave
            or (cfg.cluster_size > 1 and not HALF_WAVE_CLUSTERS)
            or ((cfg.cluster_m, cfg.cluster_n) == (2, 1) and n > 2 * m)):
        return cfg
    if cfg.cluster_size > 1:  # 2 x 1 or 2 x 2 clusters: the halves of a tile paired, A multicast
        return cfg.replace(tile_n=64, stages=8, cluster_m=1, cluster_n=2)
    if HALF_WAVE_ALONG_M and n > m:
        return cfg.replace(tile_m=SPLIT_N_TILE_M, stages=8)
    return cfg.replace(tile_n=64, stages=8)


def _paired_halves(cfg: HopperConfig, m: int, n: int) -> HopperConfig:
    """``cfg``, or, where it is 16-bit stream-K with the spread fix-up on at most ``PAIRED_HALVES``
    128 x 128 tiles, one CTA each, the same over 128 x 64 tiles (eight stages) on 1 x 2 clusters:
    each pair of halves is one 128 x 128 tile whose A rows the two CTAs multicast, and a CTA's
    partial is half a tile, so the fix-up moves half the bytes.  Not where the product is at most
    64 x 64.

    On the H200 (RESULTS.md, forty-ninth session, × cuBLAS as a caller gets it, against the rule
    off): on 13 products of one or two such tiles over K of 4096-131072, ahead in 26 of 26 runs
    by 0.03-0.15 (geomean fp16 0.603 -> 0.678, bf16 0.604 -> 0.687; in bf16 128x128x131072 0.73
    -> 0.82, 96x112x98304 0.74 -> 0.85, 128x128x8192 0.48 -> 0.63); on eight thin ones (at most
    64 rows or columns, which take this path on so few tiles) ahead on five by 0.02-0.13
    (128x32x65536 0.59 -> 0.71), level on two, behind on 64x64x131072 (0.68 -> 0.60 fp16, 0.67 ->
    0.64 bf16).  Then on ten products drawn in the class after the rule, every launch cold
    (``--scrub``): ahead in 20 of 20 runs by 0.06-0.14 (fp16 0.608 -> 0.702, bf16 0.617 -> 0.710).

    >>> spread = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk", sk_reduce="spread")
    >>> c = _paired_halves(spread, 128, 128)
    >>> c.tile_n, c.stages, c.cluster_n, c.sk_reduce
    (64, 8, 2, 'spread')
    >>> _paired_halves(spread, 256, 256).tile_n  # four tiles: not here
    128
    """
    if (not PAIRED_HALVES or cfg.input not in ("float16", "bfloat16") or cfg.policy != "streamk"
            or cfg.sk_reduce != "spread" or cfg.tile_n != 128 or cfg.tile_m != TILE_M or cfg.pingpong
            or cfg.cluster_size > 1 or _tiles(m, n, 128) > PAIRED_HALVES or max(m, n) <= 64):
        return cfg
    return cfg.replace(tile_n=64, stages=8, cluster_n=2)


def _same_columns_160(cfg: HopperConfig, n: int) -> HopperConfig:
    """``cfg``, or its 16-bit 192-wide tiles (cooperative, one CTA per tile, the staged epilogue)
    as ``SAME_COLUMNS_160`` ones where those take as many tile columns of N: the same tile grid,
    so the same waves, policy and fix-up, with fewer padding columns multiplied.

    >>> _same_columns_160(HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged"), 304).tile_n
    160
    >>> _same_columns_160(HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged"), 344).tile_n
    192
    """
    if (SAME_COLUMNS_160 is None or cfg.input not in ("float16", "bfloat16") or cfg.tile_n != 192
            or cfg.pingpong or cfg.tile_m != TILE_M or cfg.cluster_size > 1 or cfg.epilogue != "staged"):
        return cfg
    return _same_columns(cfg, n, (SAME_COLUMNS_160,)) or cfg


def _same_columns(cfg: HopperConfig, n: int, widths) -> HopperConfig | None:
    """``cfg`` on the first of ``widths`` ((tile_n, stages), narrowest first) narrower than its
    tiles that takes as many tile columns of ``n``, or None where none does."""
    columns = -(-n // cfg.tile_n)
    for width, stages in widths:
        if width < cfg.tile_n and -(-n // width) == columns:
            return cfg.replace(tile_n=width, stages=stages)
    return None


def exact_width(cfg: HopperConfig, n: int) -> HopperConfig:
    """``cfg``, or its tiles as the narrowest of ``EXACT_WIDTHS`` that takes as many tile columns
    of ``n`` where ``gemm_parts`` reads B K-major: 16-bit, cooperative 128-row tiles, one CTA per
    tile, the staged epilogue, ``n`` of at most ``EXACT_MAX_N``.  The same tile grid, so the same waves, policy and fix-up, with
    fewer padding columns multiplied (N = 288: two tiles of 144, not of 160).

    On the H200 (RESULTS.md, thirty-fifth session, fp16, B copied K-major, × cuBLAS): ahead on 11 of
    12 such shapes by 0.02-0.11 (15600x272x9728 0.85 -> 0.96, 6192x288x5072 0.93 -> 1.04,
    8920x336x10224 0.88 -> 0.92, 10848x416x9224 0.80 -> 0.85), level on 11480x344x2744.  Where an
    exact width took fewer tile columns than the config, its waves differed and it lost as often as
    it won (8344x624x2616: 0.86 on 160 -> 0.77 on three columns of 208): not taken.

    >>> cfg = HopperConfig(input="float16", tile_n=160, stages=4, epilogue="staged")
    >>> exact_width(cfg, 288).tile_n, exact_width(cfg, 304).tile_n, exact_width(cfg, 416).tile_n
    (144, 160, 144)
    >>> exact_width(cfg.replace(tile_n=192), 336).tile_n, exact_width(cfg.replace(tile_n=192), 528).tile_n
    (176, 176)
    >>> exact_width(cfg.replace(tile_n=192, cluster_m=2), 336).tile_n, exact_width(cfg.replace(tile_n=192), 704).tile_n
    (192, 192)
    """
    if (not EXACT_WIDTHS or n > EXACT_MAX_N or cfg.input not in ("float16", "bfloat16") or cfg.pingpong
            or cfg.tile_m != TILE_M or cfg.cluster_size > 1 or cfg.epilogue != "staged" or not cfg.b_k_major):
        return cfg
    return _same_columns(cfg, n, sorted(EXACT_WIDTHS)) or cfg


def wide_tile(cfg: HopperConfig, m: int, n: int, k: int, sms: int, tiles=None) -> HopperConfig:
    """``cfg``, or wide tiles (``tiles``, default ``WIDE_TILES``: (tile_n, stages, epilogue),
    the narrowest with as few tile columns as the widest) where ``gemm_parts`` reads B K-major
    (``_swap_config``: ``SWAP_WIDE_TILES`` for the transposed product): 16-bit, cooperative 128-row tiles, one CTA per
    tile; ``n`` at most ``WIDE_MAX_N`` in fewer tile columns than 256-wide tiles take (257-384 in
    one, 513-768 in two), ``k`` at least ``WIDE_MIN_K`` (for ``WIDE_TILES``; the caller bounds K
    for other ``tiles``), and the tiles filling one wave on ``sms``
    SMs to at least ``WIDE_FILL``.  A narrow product's A is then read once (N = 288: one tile
    column, not two of 144), as cuBLAS's tiles spanning N read it.  Static where they fill at least
    ``WIDE_SK_FILL`` of the wave or where K is below ``WIDE_SK_MIN_K``, else stream-K with the
    owner fix-up (every SM busy).

    On the H200 (RESULTS.md, thirty-sixth session, B copied K-major, × cuBLAS): where the tiles
    filled 0.71-1.0 of one wave, ahead of the prior pick on 8 of 8 chosen shapes by 0.06-0.22
    (fp16: 16384x264x4096 0.74 -> 0.94, 15024x288x15168 0.88 -> 0.96, 13584x368x5000 0.69 ->
    0.82, 8344x624x2616 0.76 -> 0.83), and on 19 of 21 sizes drawn as a user types them (two
    draws: geomean fp16 0.81 -> 0.90 and 0.78 -> 0.85, bf16 0.81 -> 0.90 and 0.78 -> 0.84; behind
    on 12680x336x9344 and 7192x528x4736 by 0.02-0.04); at 0.48-0.68 of a wave behind by
    0.01-0.41 (8192x288x8192 0.86 -> 0.63), and past one wave behind on three of five
    (15680x528x3712, 246 tiles, 0.95 -> 0.86; 24576x304x4096 0.94 -> 0.77): not taken there.
    Stream-K where they fill less of the wave: RESULTS.md, thirty-seventh session (``WIDE_SK_FILL``).

    >>> cfg = HopperConfig(input="float16", tile_n=160, stages=4, epilogue="staged", policy="streamk")
    >>> wide_tile(cfg, 15024, 288, 15168, 132).tile_n, wide_tile(cfg, 16384, 304, 4096, 132).tile_n
    (288, 320)
    >>> wide_tile(cfg, 13584, 368, 5000, 132).tile_n, wide_tile(cfg, 8344, 624, 2616, 132).tile_n
    (384, 320)
    >>> wide_tile(cfg, 8192, 288, 8192, 132).tile_n, wide_tile(cfg, 16384, 448, 4096, 132).tile_n
    (160, 160)
    >>> wide_tile(cfg, 16384, 304, 4096, 132).policy, wide_tile(cfg, 12032, 280, 8192, 132).policy
    ('static', 'streamk')
    >>> wide_tile(cfg, 12032, 280, 4095, 132).policy  # 0.71 of a wave but K below WIDE_SK_MIN_K
    'static'
    """
    tiles, min_k = (WIDE_TILES, WIDE_MIN_K) if tiles is None else (tiles, 0)
    if (not tiles or n > WIDE_MAX_N or k < min_k or cfg.input not in ("float16", "bfloat16")
            or cfg.pingpong or cfg.tile_m != TILE_M or cfg.cluster_size > 1 or not cfg.b_k_major):
        return cfg
    columns = -(-n // tiles[-1][0])
    if columns >= -(-n // 256):
        return cfg
    width, stages, epilogue = next(w for w in tiles if -(-n // w[0]) == columns)
    count = -(-m // TILE_M) * columns
    if not WIDE_FILL * sms <= count <= sms:
        return cfg
    return cfg.replace(tile_n=width, stages=stages, epilogue=epilogue, policy=_wide_policy(count, k, sms),
                       sk_reduce="owner", sk_ways=0)


def _wide_policy(tiles: int, k: int, sms: int) -> str:
    """The policy of one wave of ``tiles`` wide tiles over K of ``k`` on ``sms`` SMs: stream-K
    below ``WIDE_SK_FILL`` of the wave from K of ``WIDE_SK_MIN_K``, else static."""
    return "streamk" if tiles < WIDE_SK_FILL * sms and k >= WIDE_SK_MIN_K else "static"


def k_major_pick(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """What ``gemm_parts`` runs where it picked ``cfg`` and reads B K-major: wide tiles
    (``wide_tile``), else an exact width with as many tile columns (``exact_width``).  Cached:
    each call of ``gemm`` on such a B asks it once or twice, and a config's ``replace`` (its
    checks) costs about as much as the rest of the decision."""
    return _k_major_cached(cfg, m, n, k, sms, (WIDE_TILES, *_wide_limits(), EXACT_WIDTHS, EXACT_MAX_N))


def _wide_limits() -> tuple:
    """The constants besides the tile table that ``wide_tile`` reads: part of the caches' keys
    over its answers (``_k_major_cached``, ``_swap_cached``), so a changed one is not answered
    from them."""
    return WIDE_MAX_N, WIDE_MIN_K, WIDE_FILL, WIDE_SK_FILL, WIDE_SK_MIN_K


@functools.lru_cache(maxsize=1024)
def _k_major_cached(cfg: HopperConfig, m: int, n: int, k: int, sms: int, limits) -> HopperConfig:
    """``k_major_pick``'s answer (``limits``: the constants ``wide_tile`` and ``exact_width`` read,
    so that a changed one is not answered from the cache)."""
    return exact_width(wide_tile(cfg, m, n, k, sms), n)


def _padded_work(m: int, n: int, tile_n: int) -> float:
    """The SM time the ``tile_n``-wide tiles of an ``m x n`` output take, padding included, in
    ``_cheapest_waves``' units: the tiles times their width times ``WAVE_COST``."""
    return _tiles(m, n, tile_n) * tile_n * WAVE_COST.get(tile_n, 1.0)


def swap_pays(direct: HopperConfig, swapped: HopperConfig, m: int, n: int,
              epilogues: tuple[str, ...] = ("staged",), width: int | None = None) -> bool:
    """Whether ``gemm_parts`` runs an ``m x n`` product as its transpose (B^T A^T, ``n x m``, into
    the output's transposed view, on ``swapped`` with the "columns" epilogue) rather than on
    ``direct`` (``SWAP_MARGIN``): 16-bit, both configs cooperative with one of ``epilogues`` (the
    staged one, longer K; ``_swap_config`` adds the TMA-store one of shorter K from
    ``SWAP_TMA_MIN_K``: the columns form replaces either), ``swapped`` on ``direct``'s cluster
    shape or on one CTA per tile, and its padded work (``_padded_work``) below ``SWAP_MARGIN`` of
    the direct one's (``width``: of tiles that wide instead, ``_wide_swap_pays``); never from a
    deep split (``_deep_split``) whose tiles pad N little to a transposed product on other tiles,
    whose padded work does not price the split (176x840x115184: 0.91-0.93 of cuBLAS kept,
    0.64-0.70 transposed; RESULTS.md, fifty-second session).  The kernel's tiles are 128 rows by a
    width of 64-256, so an M that fills 128-row tiles poorly beside an N that fills them better
    runs faster transposed: 2112x1024x8192 on 88 tiles of 128 x 192 instead of 136 of 128 x 128
    went from 0.76-0.79 of cuBLAS to 0.91-0.94 on the H200 (RESULTS.md, thirty-second session).  Where the transpose took another
    cluster shape it fell behind on five of six shapes (664x10104x3384: 2 x 1 clusters against
    2 x 2, 0.84 of the speed).

    >>> m, n, k = 2112, 1024, 8192
    >>> swap_pays(choose_config(m, n, k, "float16", 132), choose_config(n, m, k, "float16", 132), m, n)
    True
    >>> swap_pays(choose_config(n, m, k, "float16", 132), choose_config(m, n, k, "float16", 132), n, m)
    False
    """
    if SWAP_MARGIN is None:
        return False
    for cfg in (direct, swapped):
        if cfg.input not in ("float16", "bfloat16") or cfg.pingpong or cfg.epilogue not in epilogues:
            return False
    if (swapped.cluster_m, swapped.cluster_n) not in ((direct.cluster_m, direct.cluster_n), (1, 1)):
        return False
    if _deep(direct) and not _deep(swapped) and DEEP_SPLIT is not None and _pad_256(n) <= DEEP_SPLIT[3]:
        return False  # padded work does not price the deep split (_deep_split): keep it where N pads little
    return _padded_work(n, m, width or swapped.tile_n) < SWAP_MARGIN * _padded_work(m, n, direct.tile_n)


def _wide_swap_pays(direct: HopperConfig, swapped: HopperConfig, m: int, n: int, k: int, sms: int,
                    wide, epilogues: tuple[str, ...]) -> bool:
    """Whether ``_swap_cached`` runs the transposed product where ``swap_pays`` does not, because
    its tiles would span a narrow M (``wide_tile`` with ``wide``, the transposed product's
    ``SWAP_WIDE_TILES``) and so pad less (``SWAP_WIDE_PRICED``): ``swap_pays``'s test with the wide
    tiles' padded work.  An M of 257-288 pads 128-row tiles to 384 rows but one 288-wide tile
    column to 288; at short K the transposed product's own tiles (192 wide, the TMA-store
    epilogue's widths) pad it as much, so ``swap_pays`` alone never reaches the wide tiles there.
    Only where ``direct`` takes more than one wave: the wide tiles take one, whose CTAs each run a
    tile wider than the direct one's.

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="tma", policy="streamk")
    >>> kmaj = cfg.replace(b_k_major=True)
    >>> _wide_swap_pays(cfg, kmaj, 272, 12336, 1376, 132, ((288, 3, "columns"),), ("staged", "tma"))
    True
    >>> _wide_swap_pays(cfg, kmaj, 1000, 12336, 1376, 132, ((288, 3, "columns"),), ("staged", "tma"))
    False
    """
    if not SWAP_WIDE_PRICED or _tiles(m, n, direct.tile_n) <= sms:
        return False  # one wave already: the transposed product's one wave of wider tiles takes longer
    tiles = wide_tile(swapped, n, m, k, sms, wide)
    return tiles.wide and swap_pays(direct, swapped, m, n, epilogues, tiles.tile_n)


def _deep(cfg: HopperConfig) -> bool:
    """Whether ``cfg`` is ``_deep_split``'s: split-K on 128 x 256 tiles (no other rule splits those)."""
    return cfg.tile_n == 256 and cfg.sk_ways > 0


@functools.lru_cache(maxsize=4096)
def _swap_may_pay(m: int, n: int, tile_n: int, margin: float, wide: tuple[int, ...] = ()) -> bool:
    """A bound on ``swap_pays`` (and ``_wide_swap_pays``, ``wide``: its tile widths) from the shape
    alone, before the transposed product's operands and config are looked at: whether the
    transposed output's tiles of some width have padded work below ``margin`` of the direct ones'
    (``tile_n`` wide).  Most products have none."""
    direct = _padded_work(m, n, tile_n)
    return any(_padded_work(n, m, w) < margin * direct for w in TILE_NS + wide)


def _swap_config(a_parts, b_parts, direct: HopperConfig, out, m: int, n: int, k: int, dtype: str,
                 sms: int, allow_tf32: bool, flags: dict | None = None,
                 onto_quad: bool = True) -> HopperConfig | None:
    """The config of the transposed product (``swap_pays``, or first ``_one_wave_swap`` where B's
    rows are off ``ONE_WAVE_SWAP_ROWS`` bytes and A is row-major, then ``_swap_64_rows`` over a
    row-major A, A's and B's rows on 128-byte lines) with the "columns" epilogue, or None
    where ``gemm_parts`` keeps ``direct``: also where ``out`` is not row-major with 16-byte aligned
    rows (its transposed view would not take the columns epilogue's 16-byte stores).  Over a
    row-major A (the transposed product's B, then read K-major) its tiles may span a narrow M
    (``wide_tile`` with those of ``SWAP_WIDE_TILES`` whose ``SWAP_WIDE_MIN_K`` K reaches).  Where
    the off-rows rules put the transposed product on clusters over A's rows on sectors beside a
    direct config of single CTAs, it is priced on single CTAs too (``SWAP_SINGLE_ON_SECTORS``).
    ``onto_quad`` False leaves ``SWAP_ONTO_QUAD`` and ``SWAP_ONTO_QUAD_WIDE`` out (``route`` where B
    would be copied K-major).
    A direct config of ``OFF_LINES_PAST_WAVE`` or ``ROW_MAJOR_BOXES`` is priced as the tiles it
    replaced (``_past_wave_priced``; ``flags``: the parts' ``rows_flags`` where the caller has them).

    On the H200 (RESULTS.md, thirty-sixth session, × cuBLAS), 288 and 320 wide with the columns
    epilogue over the transposed product's 160-256 wide tiles: ahead on 7 of 8 chosen narrow-M
    products (544x8088x5824 0.74 -> 0.89, 304x14568x6256 0.73 -> 0.86; behind on 264x16384x4096
    0.75 -> 0.70), and on 8 drawn as a user types them ahead on all five with K above 4096
    (geomean fp16 0.64 -> 0.73, bf16 0.63 -> 0.72), behind on two of three with K of 2080-3200."""
    item, epilogues = out.itemsize, _swap_epilogues(k)
    if SWAP_MARGIN is None or out.strides[1] != item or out.strides[0] % 16 or out.data.ptr % 16:
        return None
    picked, direct = direct, _past_wave_priced(direct, a_parts, b_parts, m, n, k, dtype, sms, allow_tf32, flags)
    if direct.epilogue not in epilogues:
        return None
    a_row_major = all(a_p.strides[1] == a_p.itemsize for a_p in a_parts)
    off_rows, off_sectors = (_rows_off(b_parts, (ONE_WAVE_SWAP_ROWS, 32)) if a_row_major and ONE_WAVE_SWAP
                             else (False, False))  # (b_rows_off at both boundaries, one pass)
    if off_rows:  # under TMA stores only over rows off sectors (measured ahead there)
        one_wave = _one_wave_swap(direct, m, n, sms, ONE_WAVE_SWAP, OFF_ROWS_ONE_WAVE,
                                  ("staged", "tma") if ONE_WAVE_SWAP_TMA and off_sectors else ("staged",))
        if one_wave is not None:
            return one_wave
    rows_64 = None
    if a_row_major and SWAP_64_ROWS is not None:  # A's and B's rows on 128-byte lines only
        lines = flags if flags is not None else rows_flags(a_parts, b_parts)
        if not (lines["a_rows_off_128"] or lines["b_rows_off_128"]):
            rows_64 = _swap_64_rows(picked, m, n, k, sms, SWAP_64_ROWS)
    if rows_64 is not None:
        return rows_64
    wide = None
    if SWAP_WIDE_TILES and a_row_major:
        wide = tuple(t for t in SWAP_WIDE_TILES if k >= SWAP_WIDE_MIN_K.get(t[0], WIDE_MIN_K)) or None
    wave = a_row_major and _wide_one_wave(direct, m, n, k, sms, (SWAP_ONE_WAVE_WIDE or (None,))[0])
    priced = tuple(t[0] for t in wide or ()) if SWAP_WIDE_PRICED else ()
    quad = (SWAP_ONTO_QUAD, SWAP_ONTO_QUAD_WIDE) if onto_quad else (None, None)
    if not (wave or _swap_may_pay(m, n, direct.tile_n, SWAP_MARGIN, priced) or _onto_quad(direct, k, quad)):
        return None
    rule = (SWAP_MARGIN, epilogues, SWAP_SINGLE_ON_SECTORS, quad)
    return _swap_cached(direct, m, n, k, dtype, sms, allow_tf32, rule, wide,
                        _swap_wide_limits() if wide or wave else None, wave,
                        **rows_flags([b_p.T for b_p in b_parts], [a_p.T for a_p in a_parts]))


def _past_wave_priced(direct: HopperConfig, a_parts, b_parts, m: int, n: int, k: int, dtype: str,
                      sms: int, allow_tf32: bool, flags: dict | None = None) -> HopperConfig:
    """The config ``_swap_config`` prices in place of ``direct``: where ``direct`` is the
    heuristic's own config for these parts and ``OFF_LINES_PAST_WAVE`` made it (one wave of 192- or
    160-wide tiles), the 128-wide stream-K tiles it replaced, whose cost the swap's rules were
    measured against; else ``direct``.  Priced on the wider tiles, the transposed product was taken
    where it ran behind them (H100, RESULTS.md, seventy-fifth session: 2144x1000x1400 0.77 of
    cuBLAS on the 192-wide tiles, 0.63 transposed; 3488x584x1800 0.79 against 0.71).  Likewise a
    direct config that ``ROW_MAJOR_BOXES`` made over a row-major B is priced as the one it replaced
    (eighty-fifth session, H100: three sizes the transposed product ran on 224-wide tiles went
    direct on 256-wide ones, 0.95-0.99 -> 0.88)."""
    flags = rows_flags(a_parts, b_parts) if flags is None else flags
    if flags.get("b_row_major") and ROW_MAJOR_BOXES and direct == _choose_cached(m, n, k, dtype, sms, allow_tf32,
                                                                                 **flags):
        unboxed = _choose_cached(m, n, k, dtype, sms, allow_tf32, **{**flags, "b_row_major": False})
        if unboxed != direct:
            return unboxed
    if OFF_LINES_PAST_WAVE is None or direct.policy != "static" or direct.cluster_size > 1:
        return direct
    if not flags["b_rows_off_128"] or direct != _choose_cached(m, n, k, dtype, sms, allow_tf32, **flags):
        return direct
    before = _choose_cached(m, n, k, dtype, sms, allow_tf32, one_wave=False, **flags)
    return before if _past_wave_192(before, m, n, k, sms) else direct


def _wide_one_wave(direct: HopperConfig, m: int, n: int, k: int, sms: int, width: int | None) -> bool:
    """Whether ``_swap_config`` runs this product transposed on one wave of ``width``-wide tiles
    (``SWAP_ONE_WAVE_WIDE``) where ``swap_pays`` does not: 16-bit, M and N past ``WIDE_MAX_N`` (a
    narrower N has the wide tiles of B's K-major copy, a narrower M those of ``swap_pays``), K of at
    least ``SWAP_WIDE_MIN_K[width]`` and ``WIDE_MIN_K`` (measured from 2048), ``direct``
    cooperative 128-row tiles of more than one wave on ``sms`` SMs, and the transposed product's
    tiles filling ``WIDE_FILL`` of one wave to one.

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged")
    >>> [_wide_one_wave(cfg, m, n, k, 132, 288) for m, n, k in ((4728, 856, 4400), (856, 5432, 6088),
    ...  (872, 5632, 10568), (704, 5432, 6088), (4728, 856, 1992), (8728, 312, 2352))]
    [True, True, False, False, False, False]
    >>> _wide_one_wave(cfg.replace(tile_n=256), 808, 4144, 10352, 132, 288)  # one wave already
    False
    """
    if (width is None or direct.input not in ("float16", "bfloat16") or direct.pingpong
            or direct.tile_m != TILE_M or min(m, n) <= WIDE_MAX_N
            or k < max(SWAP_WIDE_MIN_K.get(width, WIDE_MIN_K), WIDE_MIN_K)
            or _tiles(m, n, direct.tile_n) <= sms):
        return False
    return WIDE_FILL * sms <= _tiles(n, m, width) <= sms


@functools.lru_cache(maxsize=1024)
def _one_wave_swap(direct: HopperConfig, m: int, n: int, sms: int, widths, share: float | None,
                   epilogues: tuple[str, ...] = ("staged",)) -> HopperConfig | None:
    """The transposed product's config that ``_swap_config`` takes over a B whose rows are off
    ``ONE_WAVE_SWAP_ROWS`` bytes and a row-major A (``ONE_WAVE_SWAP``: ``widths``, ``share``
    (``OFF_ROWS_ONE_WAVE``) and ``epilogues`` (the staged one, and the TMA-store one under
    ``ONE_WAVE_SWAP_TMA`` over rows off 32-byte sectors), passed so that a changed one is not answered from the cache), or None
    where the rule does not apply: ``direct`` 16-bit, static, cooperative 128-row tiles of one CTA
    with one of ``epilogues``, in one wave, where ``m x n`` takes ``share`` of a wave of 128 x 128
    tiles to one wave.  Static clusters of 2 x 1 CTAs (A^T multicast) of the width of ``widths``
    that pads M least (the narrower on a tie) among those whose clusters fit in one wave.

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged")
    >>> [_one_wave_swap(cfg, m, n, 132, ((128, 6), (144, 5)), 0.75).tile_n
    ...  for m, n in ((288, 5592), (568, 2840), (1544, 1256), (352, 5224), (1328, 1480))]
    [144, 144, 144, 128, 128]
    >>> _one_wave_swap(cfg, 4728, 856, 132, ((128, 6), (144, 5)), 0.75) is None  # two waves
    True
    """
    if (share is None or direct.input not in ("float16", "bfloat16") or direct.pingpong
            or direct.tile_m != TILE_M or direct.cluster_size > 1 or direct.policy != "static"
            or direct.epilogue not in epilogues or not share * sms <= _tiles(m, n, 128) <= sms
            or _tiles(m, n, direct.tile_n) > sms):
        return None
    fits = [(-(-m // w) * w, w, st) for w, st in widths if _cluster_waves(n, m, w, 1, sms)[0] <= 1]
    if not fits:
        return None
    _, width, stages = min(fits)
    return direct.replace(tile_n=width, stages=stages, cluster_m=2, cluster_n=1, epilogue="columns")


def _swap_64_rows(direct: HopperConfig, m: int, n: int, k: int, sms: int,
                  rule: tuple[float, int] | None) -> HopperConfig | None:
    """The transposed product's config that ``_swap_config`` takes by ``SWAP_64_ROWS`` (``rule``),
    or None where that rule does not apply: ``direct`` (the heuristic's config) 16-bit 128 x 192
    tiles of one CTA, static or stream-K without split-K, staged or TMA stores; K of ``rule[1]``
    or more; the transposed product's 64 x 256 tiles (``n x m``) filling ``rule[0]`` of a wave
    to one.  Static 64 x 256 tiles on five stages, the columns epilogue 64 columns at a time.

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged", policy="streamk")
    >>> c = _swap_64_rows(cfg, 1024, 2112, 8192, 132, (0.97, 2048))  # 33 x 4 tiles
    >>> c.tile_m, c.tile_n, c.stages, c.out_cols, c.policy, c.epilogue
    (64, 256, 5, 64, 'static', 'columns')
    >>> [_swap_64_rows(cfg, m, n, k, 132, (0.97, 2048)) is None
    ...  for m, n, k in ((1024, 2112, 1024), (1024, 1984, 8192), (1152, 2112, 8192))]
    [True, True, True]
    >>> _swap_64_rows(cfg.replace(tile_n=128, stages=6), 1024, 2112, 8192, 132, (0.97, 2048)) is None
    True
    """
    if (rule is None or direct.input not in ("float16", "bfloat16") or direct.pingpong
            or direct.tile_m != TILE_M or direct.tile_n != 192 or direct.cluster_size > 1 or direct.sk_ways
            or direct.policy not in ("static", "streamk") or direct.epilogue not in ("staged", "tma")
            or k < rule[1] or not rule[0] * sms <= _tiles(n, m, 256, SPLIT_N_TILE_M) <= sms):
        return None
    return direct.replace(tile_m=SPLIT_N_TILE_M, tile_n=256, stages=5, out_cols=64, policy="static",
                          epilogue="columns", sk_reduce="owner", sk_waves=1)


def _swap_epilogues(k: int) -> tuple[str, ...]:
    """The heuristic epilogues under which ``swap_pays`` may transpose a product of this K
    (``SWAP_TMA_MIN_K``)."""
    return ("staged", "tma") if SWAP_TMA_MIN_K is not None and k >= SWAP_TMA_MIN_K else ("staged",)


def _swap_wide_limits() -> tuple:
    """``_wide_limits()`` and the ``SWAP_WIDE_*`` constants ``_swap_cached`` reads on wide tiles:
    part of its cache's key."""
    return (*_wide_limits(), SWAP_WIDE_CLUSTER_M, SWAP_WIDE_CLUSTER_OFF_SECTORS, SWAP_WIDE_CHUNKED,
            SWAP_ONE_WAVE_WIDE, SWAP_WIDE_PRICED)


@functools.lru_cache(maxsize=1024)
def _swap_cached(direct: HopperConfig, m: int, n: int, k: int, dtype: str, sms: int, allow_tf32: bool,
                 rule: tuple, wide, limits, wave: bool = False, **flags) -> HopperConfig | None:
    """``_swap_config``'s answer once the transposed operands' row flags are known (``rule``:
    ``SWAP_MARGIN``, the epilogues ``swap_pays`` takes (``_swap_epilogues``),
    ``SWAP_SINGLE_ON_SECTORS`` and ``_onto_quad``'s steps, so that a changed one is not answered from
    the cache; ``wide``: the wide tiles the transposed product may take, or None; ``limits``: for
    the same reason,
    ``_swap_wide_limits()`` where ``wide`` or ``wave``; ``wave``: ``_wide_one_wave`` holds, so
    where ``swap_pays`` does not, the transposed product runs ``SWAP_ONE_WAVE_WIDE`` tiles, static
    from ``WIDE_SK_FILL`` of the wave or below K of ``WIDE_SK_MIN_K``, else stream-K).
    Wide tiles go on clusters of ``SWAP_WIDE_CLUSTER_M`` x 1 CTAs where A's rows (the transposed
    product's B, ``flags["b_rows_off"]``) are off 32-byte sectors, or anywhere with
    ``SWAP_WIDE_CLUSTER_OFF_SECTORS`` off; widths in ``SWAP_WIDE_CHUNKED`` take its stages and
    columns epilogue chunk."""
    swapped = _choose_cached(n, m, k, dtype, sms, allow_tf32, one_wave=False, **flags)
    pays = swap_pays(direct, swapped, m, n, rule[1]) or _onto_quad(direct, k, rule[3], swapped)
    if (not pays and rule[2] and swapped.cluster_size > 1 and direct.cluster_size == 1
            and flags.get("b_rows_off_128") and not flags.get("b_rows_off")):
        single = _choose_cached(n, m, k, dtype, sms, allow_tf32, one_wave=False,
                                **{**flags, "b_rows_off_128": False})
        if single.cluster_size == 1 and swap_pays(direct, single, m, n, rule[1]):
            swapped, pays = single, True  # (SWAP_SINGLE_ON_SECTORS)
    if pays or (wide and _wide_swap_pays(direct, swapped, m, n, k, sms, wide, rule[1])):
        wave = False  # the transposed product pays on its own tiles (or the wide ones below): those
    elif not wave:
        return None
    else:  # one wave of wide tiles; on clusters (A's rows off sectors) only spanning M in few columns
        width, columns = SWAP_ONE_WAVE_WIDE
        if flags.get("b_rows_off") and SWAP_WIDE_CLUSTER_M > 1 and -(-m // width) > columns:
            return None
        swapped = swapped.replace(
            tile_m=TILE_M, tile_n=width, pingpong=False, cluster_m=1, cluster_n=1,
            policy=_wide_policy(_tiles(n, m, width), k, sms),
            stages=dict((w, st) for w, st, _ in SWAP_WIDE_TILES or ()).get(width, 3),
            epilogue="columns", sk_reduce="owner", sk_ways=0)
    if wide or wave:
        swapped = swapped if wave else wide_tile(swapped, n, m, k, sms, wide)
        if swapped.wide:
            if SWAP_WIDE_CLUSTER_M > 1 and (flags.get("b_rows_off") or not SWAP_WIDE_CLUSTER_OFF_SECTORS):
                swapped = swapped.replace(cluster_m=SWAP_WIDE_CLUSTER_M)
            chunked = {width: (stages, cols) for width, stages, cols in SWAP_WIDE_CHUNKED}
            if swapped.tile_n in chunked:
                stages, cols = chunked[swapped.tile_n]
                swapped = swapped.replace(stages=stages, out_cols=cols)
    return swapped.replace(epilogue="columns")


def _onto_quad(direct: HopperConfig, k: int, steps: tuple, swapped: HopperConfig | None = None) -> bool:
    """``SWAP_ONTO_QUAD`` and ``SWAP_ONTO_QUAD_WIDE`` (``steps``, each None: never): whether
    ``direct`` is 16-bit static tiles on 2 x 1 clusters, 128 x 128 over K of at least ``steps[0]``
    64-wide steps or 128 x 256 over at least ``steps[1]``, and ``swapped`` (where given) 128 x 256
    tiles on 2 x 2 clusters with the staged epilogue, so that the transposed product runs on them
    (16-bit only, as ``swap_pays``).

    >>> direct = HopperConfig(tile_n=128, stages=6, policy="static", cluster_m=2)
    >>> [_onto_quad(direct, k, on) for k, on in ((7176, (None, 32)), (7176, (64, None)), (4032, (64, 32)))]
    [False, True, False]
    >>> _onto_quad(direct.replace(tile_n=256, stages=4), 2176, (None, 32))
    True
    """
    least = dict(zip((128, 256), steps)).get(direct.tile_n)
    if (least is None or direct.input not in ("float16", "bfloat16")
            or -(-k // direct.tile_k) < least
            or (direct.tile_m, direct.policy, direct.cluster_m, direct.cluster_n, direct.pingpong)
            != (TILE_M, "static", 2, 1, False)):
        return False
    return swapped is None or (
        (swapped.tile_m, swapped.tile_n, swapped.cluster_m, swapped.cluster_n, swapped.pingpong, swapped.epilogue)
        == (TILE_M, 256, 2, 2, False, "staged"))


def b_rows_off(b_parts, boundary: int = 32) -> bool:
    """Whether the Hopper kernel would read a 16-bit B (K_p × N parts) in place with rows that do
    not all start on ``boundary``-byte boundaries (32: sectors; 128: lines): the rows of N of a
    row-major B (MN-major) or the rows of K of a column-major one (K-major B^T), as ``_operand``
    lays them out; a row stride or start off ``boundary`` bytes, but on 16 (off 16 the operand is
    copied into padded rows), e.g. a contiguous row-major B whose N is an odd multiple of 8 (both
    boundaries) or 16 (128 only), or a column-major one whose K is.  Shapes and strides only."""
    return _rows_off(b_parts, (boundary,))[0]


def b_rows_flags(b_parts) -> dict[str, bool]:
    """``choose_config``'s ``b_rows_off`` and ``b_rows_off_128`` for these B parts (one pass over
    the parts for both boundaries), and its ``b_row_major`` (``_read_row_major``, a second pass:
    every part 16-bit and read in place row-major, rows of contiguous N)."""
    off_32, off_128 = _rows_off(b_parts, (32, 128))
    return {"b_rows_off": off_32, "b_rows_off_128": off_128, "b_row_major": _read_row_major(b_parts)}


def _read_row_major(b_parts) -> bool:
    """Whether the kernel reads every one of these B parts (K_p × N) in place row-major: 16-bit,
    rows of contiguous N (``_in_place_rows``' MN-major layout), none copied."""
    for b in b_parts:
        if b.itemsize != 2 or b.shape[0] < 1 or b.shape[1] < 1:
            return False
        read = _in_place_rows(b.shape[1], b.shape[0], b.strides[1], b.strides[0], b.data.ptr, 2)
        if read is None or read[0]:
            return False
    return bool(b_parts)


def rows_flags(a_parts, b_parts) -> dict[str, bool]:
    """``choose_config``'s row flags for these A and B parts, as ``gemm_parts`` passes them when it
    picks the config: ``b_rows_flags`` and ``a_rows_off_128`` (A's rows, as ``_operand`` lays them
    out, off 128-byte lines: ``_rows_off`` over the parts as (K_p × M) transposes)."""
    return {**b_rows_flags(b_parts), "a_rows_off_128": _rows_off([a.T for a in a_parts], (128,))[0]}


def _rows_off(b_parts, boundaries: tuple[int, ...]) -> list[bool]:
    """``b_rows_off(b_parts, b)`` for each ``b`` of ``boundaries``: each True from the first part
    read in place with rows off it, unless a part before that one is not 16-bit or is copied.
    (A's parts go in as their (K_p × M) transposes.)"""
    off = [False] * len(boundaries)
    for b in b_parts:
        item = b.itemsize
        if item != 2 or b.shape[0] < 1 or b.shape[1] < 1:
            return off
        read = _in_place_rows(b.shape[1], b.shape[0], b.strides[1], b.strides[0], b.data.ptr, item)
        if read is None:
            return off  # copied
        _, ld, rows = read
        for i, boundary in enumerate(boundaries):
            off[i] = off[i] or bool(b.data.ptr % boundary or (rows > 1 and ld % boundary))
        if all(off):
            break
    return off


def _in_place_rows(outer: int, k: int, s_o: int, s_k: int, ptr: int, item: int, granule: int = 16,
                   mn_ok: bool = True) -> tuple[bool, int, int] | None:
    """``(k_major, row stride in bytes, rows)`` of the layout the kernel reads an operand in place
    with (``outer`` × ``k`` = (M or N) × K, strides in bytes, start ``ptr``), or None where it has
    to be copied: K-major (rows of contiguous K) first, then, where ``mn_ok``, MN-major (rows of
    contiguous M or N, one per k).  Both need a ``granule``-aligned start and row stride, rows that
    do not overlap and a non-negative stride; a single row's stride is never used."""
    if ptr % granule:
        return None
    if (s_k == item or k == 1) and s_o >= 0 and (outer == 1 or (s_o >= k * item and s_o % granule == 0)):
        return True, s_o, outer
    if (mn_ok and (s_o == item or outer == 1) and s_k >= 0
            and (k == 1 or (s_k >= outer * item and s_k % granule == 0))):
        return False, s_k, k
    return None


def copies_b_k_major(b_parts, m: int, n: int, config: HopperConfig, sms: int,
                     a_rows_off_128: bool = False) -> bool:
    """Whether ``gemm_parts`` copies these 16-bit B parts (K_p × N) K-major before a product of
    ``m`` rows for which the heuristic picked ``config`` on the parts in place (``B_K_MAJOR``): one
    CTA per tile (on clusters only where the copy's tiles are wide, ``B_K_MAJOR_WIDE_OVER_CLUSTERS``),
    at most ``B_K_MAJOR[0]`` columns,
    at least ``B_K_MAJOR[1]`` rows, K (the parts' together) at least ``B_K_MAJOR[2]``, ``m * n * K``
    at least ``B_K_MAJOR[3]``, and every part read in place as a row-major B (MN-major) whose rows
    do not all start on 128-byte lines; where they all start on 64-byte lines, only if the product
    on the copy (``k_major_copy_config`` on ``sms`` SMs, A's rows as ``a_rows_off_128``
    says) runs tiles of another width.  Shapes and strides only.

    >>> import types
    >>> b = types.SimpleNamespace(shape=(2616, 624), strides=(1248, 2), itemsize=2,
    ...                           data=types.SimpleNamespace(ptr=0))
    >>> cfg = HopperConfig(input="float16", tile_n=160)
    >>> copies_b_k_major([b], 8344, 624, cfg, 132), copies_b_k_major([b], 4000, 624, cfg, 132)
    (True, False)
    >>> clusters = cfg.replace(tile_n=128, cluster_m=2)
    >>> copies_b_k_major([b], 8344, 624, clusters, 132)  # 2 x 320 on the copy, 5 x 128 in place
    True
    >>> b.shape, b.strides = (9864, 328), (656, 2)
    >>> copies_b_k_major([b], 4976, 328, clusters, 132)  # 128 wide on the copy too
    False
    """
    k = sum(b.shape[0] for b in b_parts)
    wide_only = config.cluster_size > 1  # over clusters: wide tiles only
    if (not _b_k_major_shape(m, n) or (wide_only and not B_K_MAJOR_WIDE_OVER_CLUSTERS) or k < B_K_MAJOR[2]
            or m * n * k < B_K_MAJOR[3] or any(b.itemsize != 2 for b in b_parts)):
        return False
    parts = [b for b in b_parts if b.shape[0]]
    if not _read_row_major(parts):  # copied anyway, or read K-major already
        return False
    off_128, off_64 = _rows_off(parts, (128, 64))
    if not off_128:
        return False
    if wide_only:
        return k_major_copy_config(m, n, k, config.input, sms, a_rows_off_128).tile_n in WIDE_TILE_NS
    return off_64 or k_major_copy_config(m, n, k, config.input, sms, a_rows_off_128).tile_n != config.tile_n


def _b_k_major_shape(m: int, n: int) -> bool:
    """Whether an ``m``-row product of ``n`` columns is of the shape ``copies_b_k_major`` may copy B
    for (``B_K_MAJOR``: at most its first bound of columns, at least its second of rows)."""
    return bool(B_K_MAJOR) and n <= B_K_MAJOR[0] and m >= B_K_MAJOR[1]


def k_major_copy_config(m: int, n: int, k: int, kind: str, sms: int, a_rows_off_128: bool = False) -> HopperConfig:
    """The config ``gemm_parts`` picks for a product whose B it copied K-major (rows of K padded to
    128 bytes, ``_k_major_copy``): the heuristic's for such a B, then ``k_major_pick``."""
    return k_major_pick(_choose_cached(m, n, k, kind, sms, False, a_rows_off_128=a_rows_off_128), m, n, k, sms)


class Route(NamedTuple):
    """What ``gemm_parts`` does with a product whose config the heuristic picked (``route``):
    ``how`` is "one" (one launch of ``config``), "split" (``config`` on the first ``m1`` rows, then
    ``rest`` on the others: ``tail_split``), "swap" (the transposed product B^T A^T on ``config``,
    ``_swap_config``'s) or "copy" (B copied K-major, the config then picked for the copy:
    ``k_major_copy_config``; ``config`` None)."""

    how: str
    config: HopperConfig | None
    m1: int = 0
    rest: HopperConfig | None = None


def route(a_parts, b_parts, out, config: HopperConfig, m: int, n: int, k: int, kind: str, sms: int,
          flags: dict, *, beta: float = 0.0, allow_tf32: bool = False) -> Route:
    """What ``gemm_parts`` does with these parts once the heuristic picked ``config`` for them
    (``flags``: their ``rows_flags``), in its order; float16 and bfloat16 only (others run one
    launch), and no copy or transpose where K = 0.

    1. B copied K-major where ``copies_b_k_major`` says so and the product does not run
       transposed (looked up once, for such products only, where ``beta == 0``, without
       ``SWAP_ONTO_QUAD``: behind the copy on 15168x296x9240, 0.93 -> 0.65): decided first, so
       the copy's config runs instead of the clusters' two launches.
    2. Two launches on two bands of rows where ``config`` runs 2 x 1 clusters and ``tail_split``'s
       ratio is at most ``TAIL_SPLIT`` (measured there: RESULTS.md, 23rd and 24th sessions).
    3. The transposed product where ``_swap_config`` gives one (``beta == 0``: out only), unless
       ``_direct_64_rows`` runs the direct product on that config's 64-row counterpart (one launch
       of another config, ``DIRECT_64_ROWS``).
    4. Else one launch of ``config``.

    Shapes and strides only (no GPU): ``gemm_copies_b`` and the benchmarks' filters ask it."""
    picked = kind in ("float16", "bfloat16") and k
    copies = picked and copies_b_k_major(b_parts, m, n, config, sms, flags["a_rows_off_128"])
    swapped = (_swap_config(a_parts, b_parts, config, out, m, n, k, kind, sms, allow_tf32, flags, onto_quad=False)
               if picked and beta == 0 and copies else None)
    if copies and swapped is None:
        return Route("copy", None)
    if TAIL_SPLIT and kind in ("float16", "bfloat16") and (config.cluster_m, config.cluster_n) == (2, 1):
        split = _tail_split_cached(config, m, n, k, kind, sms, **flags)
        if split is not None and split[2] <= TAIL_SPLIT:
            return Route("split", config, split[0], split[1])
    if picked and beta == 0:
        if not copies:
            swapped = _swap_config(a_parts, b_parts, config, out, m, n, k, kind, sms, allow_tf32, flags)
        if swapped is not None:
            rows_64 = _direct_64_rows(swapped, a_parts, b_parts, m, n, k, sms, flags)
            return Route("swap", swapped) if rows_64 is None else Route("one", rows_64)
    return Route("one", config)


def _direct_64_rows(swapped: HopperConfig, a_parts, b_parts, m: int, n: int, k: int, sms: int,
                    flags: dict) -> HopperConfig | None:
    """``SWAP_64_ROWS`` the other way round (``DIRECT_64_ROWS``): where the transposed product
    would run ``swapped``, 128 x 192 single-CTA tiles that ``_swap_64_rows`` takes for it, A and B
    row-major with their rows on 128-byte lines (``flags``: the parts' ``rows_flags``), the direct
    product on static 64 x 256 tiles, five stages, the staged epilogue 64 columns at a time; else
    None.

    >>> from types import SimpleNamespace as NS
    >>> a, b = NS(strides=(16384, 2), itemsize=2), NS(strides=(2048, 2), itemsize=2)
    >>> sw = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="columns", policy="streamk")
    >>> on = {"a_rows_off_128": False, "b_rows_off_128": False}
    >>> c = _direct_64_rows(sw, [a], [b], 2112, 1024, 8192, 132, on)
    >>> c.tile_m, c.tile_n, c.stages, c.out_cols, c.policy, c.epilogue
    (64, 256, 5, 64, 'static', 'staged')
    >>> [_direct_64_rows(sw, [a], [b], 2112, 1024, 8192, 132, {**on, off: True}) is None
    ...  for off in ("a_rows_off_128", "b_rows_off_128")]
    [True, True]
    """
    if (DIRECT_64_ROWS is None or flags.get("a_rows_off_128") or flags.get("b_rows_off_128")
            or swapped.tile_n != 192  # (before the replace below, which other widths' out_cols may fail)
            or not all(p.strides[1] == p.itemsize for p in (*a_parts, *b_parts))):
        return None
    rows_64 = _swap_64_rows(swapped.replace(epilogue="staged"), n, m, k, sms, DIRECT_64_ROWS)
    return None if rows_64 is None else rows_64.replace(epilogue="staged")


def gemm_copies_b(a_parts, b_parts, out, m: int, n: int, k: int, kind: str, sms: int) -> bool:
    """Whether ``gemm_parts``, picking the config itself with ``beta == 0``, copies these B parts
    K-major (``route``'s "copy"): ``copies_b_k_major`` on the heuristic's config for the parts in
    place, where it does not run the transposed product (``_swap_config``) into ``out``."""
    flags = rows_flags(a_parts, b_parts)
    config = choose_config(m, n, k, kind, sms, **flags)
    return route(a_parts, b_parts, out, config, m, n, k, kind, sms, flags).how == "copy"


def _config_cost(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> float:
    """The wave-cost model's estimate for a cooperative config (``_cheapest_waves``' units): static
    (and every policy that does not split tiles) its waves times ``tile_n`` times ``WAVE_COST``;
    stream-K its tiles' columns shared evenly over ``sms``, times ``SK_OVERHEAD``."""
    per_column = cfg.tile_n * WAVE_COST.get(cfg.tile_n, 1.0)
    if cfg.policy == "streamk":
        return _tiles(m, n, cfg.tile_n) * per_column / sms * SK_OVERHEAD[-(-k // 64) < FILL_MIN_K_STEPS]
    return _waves(m, n, cfg.tile_n, sms) * per_column


def _off_rows_clusters(cfg: HopperConfig, m: int, n: int, k: int, sms: int,
                       margin: float = 1.0, *, on_sectors: bool = True, b_row_major: bool = False) -> HopperConfig:
    """``cfg``, or static 2-CTA clusters (``cluster_m=2``, B multicast) of the ``OFF_ROWS_CLUSTERS``
    width whose waves of ``sms // 2`` clusters cost least, where that cost is at most ``margin``
    times ``_config_cost(cfg)``.  Cooperative 128-row configs only (thin pingpong tiles keep theirs).
    With B's rows on 32-byte sectors (``on_sectors``) and at most ``NARROW_N`` columns, the static
    ``NARROW_WIDTHS`` tile whose waves cost least replaces the clusters where it costs less than
    they do: itself where it costs less than ``cfg`` too, else ``cfg``.  On sectors, a ``cfg`` of
    one wave of single CTAs over an odd number of tile rows stays where the clusters only match
    its cost, past half a wave (``OFF_ROWS_ODD_TIE``).

    >>> cfg = choose_config(4096, 4104, 4096, "float16", 132, b_rows_off=True)
    >>> cfg.cluster_m, cfg.tile_n, cfg.policy
    (2, 128, 'static')
    >>> choose_config(4096, 4104, 4096, "float16", 132).cluster_m  # B's rows on 128 bytes
    1
    >>> choose_config(1328, 7192, 8440, "float16", 132, b_rows_off_128=True).tile_n
    256
    """
    if not OFF_ROWS_CLUSTERS or cfg.pingpong or cfg.tile_m != TILE_M or sms < 2:
        return cfg
    best, width, stages = min((_cluster_cost(m, n, w, c, sms), w, st) for w, st, c in OFF_ROWS_CLUSTERS)
    own = _config_cost(cfg, m, n, k, sms)
    if best > margin * own:
        return cfg
    if (OFF_ROWS_ODD_TIE and on_sectors and best >= own and -(-m // TILE_M) % 2
            and (HALF_WAVE_HALVES or 0) * sms < _tiles(m, n, cfg.tile_n, TILE_M) <= sms):
        return cfg  # one wave of single CTAs, level in cost: not clusters that pad an odd row of tiles
    if n <= NARROW_N and on_sectors:  # few tile columns on sectors: a
        # static width that pads fewer of them (rows off sectors too overload the L2: clusters)
        narrow = _boxes_pick([(_static_cost(m, n, w, c, sms), w, st) for w, st, c, most in NARROW_WIDTHS
                              if most is None or -(-k // 64) <= most], n, k, b_row_major)
        if narrow[0] < best:
            return _static_width(cfg, narrow[1], narrow[2], k) if narrow[0] < own else cfg
    return _static_width(cfg, width, stages, k).replace(cluster_m=2)


def _boxes_pick(options: list, n: int, k: int, b_row_major: bool) -> tuple:
    """The cheapest of ``options`` ((cost, width, stages) each), unless it is a width of
    ``ROW_MAJOR_BOXES`` that ``_whole_boxes_pay`` refuses over N of ``n`` and K of ``k``: then the
    cheapest of the others where that is one of the widths it gives way to, else it all the same.

    >>> _boxes_pick([(2.0, 256, 4), (1.0, 224, 4), (3.0, 128, 6)], 4416, 4096, True)
    (2.0, 256, 4)
    >>> _boxes_pick([(2.0, 128, 6), (1.0, 224, 4), (3.0, 256, 4)], 4416, 4096, True)  # not to 128
    (1.0, 224, 4)
    >>> _boxes_pick([(2.0, 256, 4), (1.0, 224, 4)], 4416, 4096, False)
    (1.0, 224, 4)
    """
    best = min(options)
    if _whole_boxes_pay(best[1], n, k, b_row_major):
        return best
    other = min((o for o in options if o[1] != best[1]), default=best)
    return other if other[1] in ROW_MAJOR_BOXES[best[1]] else best


def _whole_boxes_pay(width: int, n: int, k: int, b_row_major: bool) -> bool:
    """Whether the heuristic may take ``width``-wide tiles over N of ``n`` and K of ``k``:
    anywhere, except a width of ``ROW_MAJOR_BOXES`` over a B read row-major (``b_row_major``),
    whose tiles load whole 64-wide boxes, from K of ``ROW_MAJOR_BOXES_MIN_K`` steps, where it
    takes more tile columns than the width of those boxes.

    >>> [_whole_boxes_pay(224, n, 4096, True) for n in (880, 4416, 1216)]  # 4 / 4, 20 / 18, 6 / 5 columns
    [True, False, False]
    >>> _whole_boxes_pay(224, 4416, 4096, False), _whole_boxes_pay(192, 4416, 4096, True)
    (True, True)
    >>> _whole_boxes_pay(224, 4416, 2048, True), _whole_boxes_pay(224, 4416, 2049, True)  # 32 / 33 steps
    (True, False)
    """
    if (not (b_row_major and ROW_MAJOR_BOXES) or width not in ROW_MAJOR_BOXES
            or -(-k // 64) < ROW_MAJOR_BOXES_MIN_K):
        return True
    return -(-n // width) <= -(-n // (-(-width // 64) * 64))


def _static_cost(m: int, n: int, width: int, per_column: float, sms: int) -> float:
    """The wave-cost model's estimate for static waves of 128 x ``width`` tiles on ``sms`` SMs:
    their waves times ``width`` times ``per_column`` (``WAVE_COST``'s units)."""
    return _waves(m, n, width, sms) * width * per_column


def _cluster_cost(m: int, n: int, width: int, per_column: float, sms: int, cluster_n: int = 1) -> float:
    """The wave-cost model's estimate for static clusters of 2 x ``cluster_n`` tiles of 128 x
    ``width`` (``_cluster_waves``) times ``width`` times ``per_column``."""
    return _cluster_waves(m, n, width, cluster_n, sms)[0] * width * per_column


def _cluster_waves(m: int, n: int, width: int, cluster_n: int, sms: int) -> tuple[int, int, int]:
    """(waves, clusters a wave holds, columns of blocks) of static clusters of 2 x ``cluster_n``
    tiles of 128 x ``width``: one cluster per block of two tile rows and ``cluster_n`` tile
    columns, ``sms // 2`` pairs or ``quad_clusters(sms)`` 2 x 2 blocks a wave."""
    slots = _wave_clusters(2, cluster_n, sms)
    rows, cols = -(-m // (2 * TILE_M)), -(-n // (cluster_n * width))
    return -(-(rows * cols) // max(1, slots)), slots, cols


def _wave_clusters(cluster_m: int, cluster_n: int, sms: int) -> int:
    """Clusters of ``cluster_m`` x ``cluster_n`` CTAs that the wave-cost model puts in one wave of
    ``sms`` SMs: ``quad_clusters(sms)`` of 2 x 2, else ``sms`` over the cluster's size."""
    return quad_clusters(sms) if (cluster_m, cluster_n) == (2, 2) else sms // (cluster_m * cluster_n)


def quad_clusters(sms: int) -> int:
    """4-CTA clusters that one wave of ``sms`` SMs holds: ``QUAD_CLUSTERS[sms]`` (measured), else
    ``sms // 4``."""
    return QUAD_CLUSTERS.get(sms, sms // 4)


def _quad_streamk_pays(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> bool:
    """Whether stream-K over 2 x 2 clusters (``quad_streamk``) replaces ``cfg``, 128 x 128 tiles
    with one CTA per tile, stream-K or static: where ``QUAD_SK`` says so.

    On the H200 (RESULTS.md, thirty-first session, fp16, cuBLAS in the same run) the stream-K
    launches of below a wave of tiles ran 0.71-0.77 of cuBLAS; over 2 x 2 clusters 0.80-0.91
    wherever the blocks padded at most a fifth more tiles (1024x1024x16384 0.76 -> 0.87,
    768x1024x16384 0.75 -> 0.90, 640x1280x12288 0.77 -> 0.91, 256x256x65536 0.73 -> 0.80, bf16
    alike), and so did static launches below 0.75 of a wave, eight of eight (1416x960x17576 0.78
    -> 0.96, 2384x512x18288 0.75 -> 0.90, 1376x704x8072 0.98 -> 1.11, 1024x1024x4096 0.66 ->
    0.72); from 0.75 of a wave on, static stayed ahead on four of five (3064x576x5584 0.92
    against 0.62), and blocks that padded 1.2-1.4 times the tiles lost on five of five.
    896x896x16384 (7 x 7 tiles in 16 blocks) lost, 0.71 -> 0.67, and so did four
    blocks split over 28 clusters with the spread fix-up (512x512x32768 0.75 -> 0.70,
    256x1024x32768 0.83 -> 0.80), where one or two blocks split over 30 gained.

    >>> base = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk")
    >>> _quad_streamk_pays(base, 768, 1024, 16384, 132), _quad_streamk_pays(base, 896, 896, 16384, 132)
    (True, False)
    >>> _quad_streamk_pays(base, 1024, 1024, 2048, 132)  # 32 K steps: not measured
    False
    >>> _quad_streamk_pays(base, 256, 256, 65536, 132), _quad_streamk_pays(base, 512, 512, 32768, 132)
    (True, False)
    """
    if (QUAD_SK is None or cfg.policy not in QUAD_SK_POLICIES or cfg.tile_n != 128 or cfg.pingpong
            or cfg.cluster_size > 1 or sms < 4):
        return False
    fill, min_steps, pad, spread_blocks = QUAD_SK
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    blocks, spread = _quad_blocks(rows, cols, k_iters, sms)
    if not (rows * cols < fill * sms and k_iters >= min_steps and 4 * blocks <= pad * rows * cols):
        return False
    return not spread or blocks <= spread_blocks


def _quad_wider_split(other: HopperConfig, m: int, n: int) -> bool:
    """Whether ``other``, the config a product takes without the 2 x 2 clusters' rule
    (``_quad_streamk_pays``), replaces them: split-K on 128 x 192 single-CTA tiles whose area is
    at most 1 / ``QUAD_SK_192_PAD`` of the 2 x 2 blocks' of 128 x 128 tiles.

    The blocks round the tile rows and columns up to even counts: 576 columns take three 192-wide
    tiles, or five 128-wide ones, which the blocks make six (768).  On the H100 (RESULTS.md: runs
    of the seventy-sixth session, read in the seventy-ninth; × cuBLAS as callers get them), on the
    five sizes drawn where the blocks' area is 1.2-1.33 times the wider tiles', the split was
    ahead in 9 of 9 runs by 0.11-0.20 (2032x576x14544 0.71 -> 0.91, 520x1696x13568 0.62 -> 0.80);
    from 1.14 to 1.19 it was ahead in four runs and behind in four by up to 0.25 (1136x920x9672
    1.33 -> 1.08).

    >>> split = HopperConfig(input="float16", tile_n=192, stages=4, policy="streamk", sk_ways=2,
    ...                      epilogue="staged")
    >>> _quad_wider_split(split, 2032, 576), _quad_wider_split(split, 1136, 920)
    (True, False)
    >>> _quad_wider_split(split, 2112, 456)  # 160 wide: as many tile columns
    False
    """
    if (QUAD_SK_192_PAD is None or other.tile_n != 192 or not other.sk_ways or other.cluster_size > 1
            or _same_columns_160(other, n).tile_n != 192):
        return False
    blocks = _quad_block_count(-(-m // TILE_M), -(-n // 128))
    return 4 * blocks * 128 >= QUAD_SK_192_PAD * _tiles(m, n, 192) * 192 - 1e-9


def _quad_static(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg`` (``quad_streamk``'s), static where ``QUAD_SK_STATIC`` says so: the blocks' K steps
    times the share of the 4-CTA clusters their one static wave leaves idle (what stream-K would
    take off each cluster's steps) below ``QUAD_SK_STATIC``.  Stream-K then saves less than its
    fix-up costs: nearly every block split over two clusters, whose partials of four tiles are
    stored, waited for and added.

    On the H100 (RESULTS.md, seventy-sixth session, fp16 and bf16, × cuBLAS, the heuristic's
    config), on 33 sizes drawn as a user types them where it runs such clusters, static was ahead
    or level in 18 of 18 runs below 25 saved steps (880x1752x4128, 4 steps, 0.75 -> 0.86;
    920x1440x4056, 13 steps, 0.79 -> 0.87), ahead in 9 of 10 at 27-34, mixed at 36-48 (8 of 22
    ahead) and behind in 14 of 16 from 49 on (928x1272x13280, 69 steps, 0.89 -> 0.76); on a
    second draw, ahead in five of six runs below 25 steps by 0.06-0.08 (1792x800x4224, 4 steps,
    0.78 -> 0.86), behind in one by 0.02, and behind in nine of twelve at 25-35 steps
    (592x1280x4128, 32 steps, 0.73 -> 0.63).  On a third draw, the rule as it is (8-23 saved
    steps, as callers get them): ahead in 13 of 24 runs by 0.02-0.08, within 0.01 in eight,
    behind in three by 0.04-0.09 (896x1688x8104 bf16, 8.5 steps, 1.17 -> 1.08); geomean fp16
    0.920 -> 0.936, bf16 0.978 -> 0.998.

    >>> quad = quad_streamk(HopperConfig(tile_n=128, stages=6), 880, 1752, 4128, 132)  # 28 blocks
    >>> _quad_static(quad, 880, 1752, 4128, 132).policy, _quad_static(quad, 592, 1280, 4128, 132).policy
    ('static', 'streamk')
    >>> _quad_static(quad_streamk(HopperConfig(tile_n=128), 256, 256, 65536, 132), 256, 256, 65536, 132).policy
    'streamk'
    """
    if QUAD_SK_STATIC is None or cfg.policy != "streamk" or cfg.cluster_size != 4:
        return cfg
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    blocks, _ = _quad_blocks(rows, cols, k_iters, sms)
    clusters = quad_clusters(sms)
    if blocks > clusters or k_iters * (clusters - blocks) >= QUAD_SK_STATIC * clusters:
        return cfg
    return cfg.replace(policy="static")


def _quad_block_count(rows: int, cols: int) -> int:
    """The 2 x 2 blocks that cover a ``rows`` x ``cols`` tile grid (each count rounded up to even)."""
    return -(-rows // 2) * -(-cols // 2)


def _quad_blocks(rows: int, cols: int, k_iters: int, sms: int) -> tuple[int, bool]:
    """(2 x 2 blocks of a ``rows`` x ``cols`` tile grid, whether stream-K over them and
    ``quad_clusters(sms)`` clusters takes the spread fix-up: each block split four or more ways,
    as ``fit_policy`` decides for tiles on CTAs)."""
    blocks = _quad_block_count(rows, cols)
    clusters = quad_clusters(sms)
    return blocks, clusters >= 4 * schedule.streamk_tiles(blocks, clusters, k_iters)


def _split_k(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or, where ``SPLIT_K`` holds (16-bit stream-K on 128 x 128 tiles, one CTA each,
    ``sms // tiles`` from ``SPLIT_K[0]`` to ``SPLIT_K[1]``), split-K: that many CTAs a tile, each one
    equal k-slice (``sk_ways``), with the owner fix-up.  ``choose_config`` takes it in place of
    stream-K over every SM, and of the 2 x 2 clusters (``_quad_streamk_pays``) where A's and B's
    rows are on 128-byte lines; rows off them keep the clusters, whose multicast halves each CTA's
    loads of the operands such rows make costly.

    Stream-K splits the tiles' K iterations evenly over every SM, so a CTA's range straddles tiles
    and the CTAs on the tiles of one row or column read different k-slabs of A or B at any moment;
    split-K leaves some SMs idle (49 tiles: 98 CTAs of 132) but its slices of all tiles start
    together and read the same slabs in step.  On the H200 (RESULTS.md, forty-eighth session, fp16,
    × cuBLAS, nine products of 28-63 tiles over K of 6144-15816) split-K on single CTAs against
    the heuristic then (stream-K over 132 CTAs, or 2 x 2 clusters): 888x888x13696 0.64 -> 0.74
    (0.52 -> 0.35 µs a k-iteration in the timeline), 272x1616x7952 0.72 -> 0.84, 328x1416x6144
    0.76 -> 0.86, 984x480x7632 0.82 -> 0.90 (over clusters), 1056x792x13424 0.65 -> 0.71,
    1192x264x8080 0.77 -> 0.81 (four ways: the spread fix-up before), level on two, behind on
    784x912x8176 by 0.02 (clusters).  Then on sizes drawn as a user types them where the rule
    changed the launch, fp16 and bf16 (three draws): against stream-K ahead in 37 of 39 runs by
    0.01-0.25 (784x576x11440 bf16 0.68 -> 0.93, 352x2080x6912 0.85 -> 1.03), level in one, behind
    by 0.02 in one.  Against the 2 x 2 clusters: where A's or B's rows were off 128-byte lines
    behind in 13 of 19 runs by 0.02-0.23 (1672x448x11592 1.19 -> 0.96, 1968x432x8128 1.10 ->
    0.92), level in five, so the clusters stay there; with both on lines ahead on six of seven
    (512x2048x16384 0.84 -> 0.96, 1024x1024x16384 0.86 -> 0.95, 704x832x12864 0.94 -> 1.05), 0.03
    behind on 768x1024x16384.

    >>> cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk")
    >>> shapes = ((888, 888), (272, 1616), (1192, 264), (256, 256), (1024, 1088))
    >>> [_split_k(cfg, m, n, 8192, 132).sk_ways for m, n in shapes]
    [2, 3, 4, 0, 0]

    Static tiles of this kind (one partial wave, or few tiles on a short K: ``fit_policy``) take it
    from ``SPLIT_K_FROM_STATIC`` (40) 64-wide K steps.  On the H200 (same session, fp16, 128 x 128
    tiles, two to four CTAs a tile): at K of 47-62 steps and 175 ahead of static on 10 of 10
    products by 0.04-0.16 (1024x704x3704 0.78 -> 0.94, 2760x320x11168 0.80 -> 0.92); over K of 8,
    16, 24, 32 and 40 steps on four products, behind by 0.24-0.30, 0.13-0.19, 0.07-0.10, 0.01-0.04,
    and ahead by 0.01-0.03 at 40.

    >>> static = cfg.replace(policy="static")
    >>> _split_k(static, 1024, 704, 2560, 132).sk_ways, _split_k(static, 1024, 704, 2048, 132).policy
    (2, 'static')

    The thin pingpong tiles (``THIN_TILE``, at most 64 rows or columns) on stream-K take it too
    (``SPLIT_K_THIN``): on the H200 (same session, fp16 × cuBLAS) ahead on six of seven chosen
    products by 0.03-0.12 (48x3072x16384 0.84 -> 0.95, 32x2560x32768 0.75 -> 0.87, 64x2048x16384
    0.82 -> 0.88), level on 4096x64x16384 (0.96 -> 0.95); then on ten thin products drawn after
    the rule (8-48 rows or columns, K of 344-22688) ahead on seven by 0.02-0.16 (48x2408x18296
    0.69 -> 0.85, 2480x48x808 0.63 -> 0.73), level on two, behind by 0.02 on 3688x24x10544:
    geomean 0.724 -> 0.781.

    >>> thin = HopperConfig(input="float16", tile_m=64, tile_n=64, stages=12, pingpong=True, policy="streamk")
    >>> _split_k(thin, 64, 2048, 16384, 132).sk_ways, _split_k(thin, 48, 3072, 16384, 132).sk_ways
    (4, 2)
    """
    thin = cfg.pingpong and (cfg.tile_m, cfg.tile_n, cfg.stages) == THIN_TILE and SPLIT_K_THIN
    if (SPLIT_K is None or cfg.policy not in ("streamk", "static") or cfg.input not in ("float16", "bfloat16")
            or cfg.cluster_size > 1 or not (thin or (not cfg.pingpong and cfg.tile_m == TILE_M
                                                     and cfg.tile_n == 128))):
        return cfg
    if cfg.policy == "static" and (thin or SPLIT_K_FROM_STATIC is None
                                   or -(-k // cfg.tile_k) < SPLIT_K_FROM_STATIC):
        return cfg
    ways = sms // _tiles(m, n, cfg.tile_n, cfg.tile_m)
    return (cfg.replace(policy="streamk", sk_ways=ways, sk_reduce="owner", sk_waves=1)
            if SPLIT_K[0] <= ways <= SPLIT_K[1] else cfg)


def _deep_split(cfg: HopperConfig, m: int, n: int, k: int, sms: int, b_off_lines: bool) -> HopperConfig | None:
    """Split-K on 128 x 256 tiles where ``DEEP_SPLIT`` holds (a wave holds 3 to 8 CTAs a tile, or
    up to ``DEEP_SPLIT_FEW`` on clusters, each a k-slice of at least 96 64-wide steps), else None:
    ``sms // tiles`` CTAs a tile (as many as the clusters a wave holds allow), each one
    equal k-slice, the spread fix-up; on 2 x 1 clusters that multicast B where ``b_off_lines`` (B's
    rows off 128-byte lines) and the tile rows come in pairs, or are odd but ``DEEP_SPLIT_ODD_ROWS``
    or more (a padded row of clusters then costs little).  The wider tile reads a quarter fewer
    operand bytes per FLOP than the 128 x 128 tiles that split-K, stream-K or the 2 x 2 clusters
    run otherwise there, and over such a K its fix-up, twice the partial bytes, is a small share.

    On the H200 (RESULTS.md, fifty-second session, fp16 × cuBLAS, chosen products): 1024x1024x65536
    0.89 -> 0.96, 768x768x65536 0.84 -> 0.96, 640x1280x65536 0.81 -> 0.97, 1024x1024x50000 0.83 ->
    0.95, 768x1024x32768 0.76 -> 0.89, and with B's rows off the lines on clusters 1000x1000x65536
    0.83 -> 0.97 (0.78 on single CTAs), 1000x1000x32768 0.86 -> 0.96, 1200x800x50000 0.75 -> 0.81
    (0.60 on single CTAs).  Where a slice had 64 steps (1024x1024x16384) the split 128 x 128
    tiles stayed ahead (0.96 against 0.92); eight tiles, 8 ways (512x512x65536, half the SMs) ran
    0.60 against 0.74.  With the rows on the lines the clusters were level or behind by 0.01-0.02,
    and where they pad an odd row of tiles behind by up to 0.23 (800x1500x30000, 640x1280x65536).
    With B's rows off the lines over an odd number of tile rows (fifteen products, ten drawn), the
    clusters were behind single CTAs by 0.01-0.24 on all seven of 3-7 rows, and ahead by 0.02-0.24
    on seven of eight of 9-27 rows (1088x936x107768 0.66 -> 0.84, 3184x216x40688 0.82 -> 0.95),
    level on the eighth; so odd rows take them from 9 (``DEEP_SPLIT_ODD_ROWS``).
    Where the wider tiles pad N by a fifth or more beyond the 128-wide ones, the split launched
    directly ran behind on 9 of 12 drawn products by 0.03-0.12 (fp16; 640x640x65536 0.86 -> 0.76,
    768 columns for 640; 2064x288x26224 0.53 -> 0.41) and ahead on three by 0.02-0.03.  But where
    M pads little, the caller then runs the product transposed (``swap_pays``: the wide tiles'
    padded work is the larger), on the transposed product's own config, and against the caller's
    launch without the split that was ahead in 17 of 20 runs (fp16 and bf16, ten products) by
    0.03-0.17 (2095x344x28216 0.68 -> 0.84, 1584x368x74200 0.63 -> 0.80), level in two, behind
    by 0.03 in one.  So the split stays out only where 256-wide tiles would pad both M and N by
    more than ``DEEP_SPLIT[3]`` (1.15): 640x640x65536 and 581x520x52752 ran 0.85 and 0.59 without
    it, 0.76 and 0.56 with it.

    Fewer tiles, 9 to 16 CTAs a tile (``DEEP_SPLIT_FEW``), take the split only on the 2 x 1
    clusters, whatever B's rows: over ten such products (8-14 tiles, slices of 96 steps or more;
    fp16) the clusters were ahead of the heuristic's launch by 0.07-0.32 on all six whose 256-wide
    tiles pad N little and whose tile rows pair up (1299x248x106312 0.70 -> 1.02, 208x1448x121888
    0.59 -> 0.90, 512x512x65536 0.77 -> 0.85, on single CTAs 0.76) and behind or level on three of
    the four others (835x280x56352 0.71 -> 0.59, 264x800x78416 0.60 -> 0.52 over three rows).
    (512x512x65536 and 512x768x65536, slices of 64 and 93 steps, stay below ``DEEP_SPLIT[2]``.)
    On eight products drawn after it, fp16 0.689 -> 0.902 and bf16 0.668 -> 0.897, ahead in 14
    of 16 runs by 0.17-0.40; the two behind were one product (176x840x115184) that the caller ran
    transposed on 128 x 128 tiles, where the split launched directly ran 0.91-0.93 against
    0.64-0.70: ``swap_pays`` now keeps a deep split where N pads little.

    >>> cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk")
    >>> deep = _deep_split(cfg, 1000, 1000, 65536, 132, True)
    >>> deep.tile_n, deep.sk_ways, deep.sk_reduce, deep.cluster_m
    (256, 4, 'spread', 2)
    >>> _deep_split(cfg, 600, 1000, 65536, 132, True).cluster_m  # five tile rows
    1
    >>> _deep_split(cfg, 1070, 968, 58648, 132, True).cluster_m  # nine
    2
    >>> _deep_split(cfg, 1024, 1024, 16384, 132, False) is None  # slices of 64 steps
    True
    >>> _deep_split(cfg, 640, 640, 65536, 132, False) is None  # 768 columns and rows for 640
    True
    >>> _deep_split(cfg, 1584, 368, 74200, 132, False).sk_ways  # 512 columns for 368, M pads little
    5
    >>> few = _deep_split(cfg, 1299, 248, 106312, 132, False)  # 11 tiles, 12 CTAs each: clusters
    >>> few.sk_ways, few.cluster_m
    (12, 2)
    >>> _deep_split(cfg, 896, 416, 86384, 132, False) is None  # ... not over 7 rows
    True
    """
    if DEEP_SPLIT is None:
        return None
    lo, hi, min_steps, pad = DEEP_SPLIT
    tiles = _tiles(m, n, 256)
    ways = sms // tiles
    rows = -(-m // TILE_M)
    rows_pair = rows % 2 == 0 or (DEEP_SPLIT_ODD_ROWS is not None and rows >= DEEP_SPLIT_ODD_ROWS)
    if ways < lo or -(-k // 64) // ways < min_steps:
        return None
    if hi < ways <= (DEEP_SPLIT_FEW or 0):  # few tiles: only on clusters
        if not (rows_pair and _pad_256(n) <= pad):
            return None
        pairs = True
    elif ways <= hi and min(_pad_256(n), _pad_256(m)) <= pad:
        pairs = b_off_lines and rows_pair
    else:
        return None
    return cfg.replace(tile_m=TILE_M, tile_n=256, stages=dict(TILE_CHOICES)[256], pingpong=False, policy="streamk",
                       sk_ways=ways, sk_reduce="spread", sk_waves=1, cluster_m=2 if pairs else 1, cluster_n=1)


def _pad_256(x: int) -> float:
    """What 256-wide tiles cover of ``x`` against what 128-wide ones do (1.2 for 640: 768 / 640)."""
    return -(-x // 256) * 256 / (-(-x // 128) * 128)


def quad_streamk(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg`` as stream-K over 2 x 2 blocks of its tiles and the 4-CTA clusters one wave holds,
    with the fix-up ``fit_policy`` would pick for blocks on clusters: "spread" where each block is
    split four or more ways (every block then takes the same whole number of clusters:
    ``plan_launch``), else "owner".  Split-K over the blocks where the clusters hold two or more a
    block (``sk_ways``: 8-15 blocks on an H200's 30 clusters) was tried and not kept: on the H200
    (RESULTS.md, forty-eighth session, fp16 × cuBLAS) it led stream-K over such blocks on six chosen
    products (984x480x7632, 8 blocks, 0.78 -> 0.89; 272x1616x7952, 14 blocks, 0.67 -> 0.69), then
    on 16 sizes drawn as a user types them was level: 4 runs ahead by 0.02-0.08 (1672x480x4296 0.75
    -> 0.83), 4 behind by 0.02-0.04 (1480x424x7704 1.33 -> 1.29), 8 within 0.01.

    >>> quad_streamk(HopperConfig(tile_n=128), 256, 256, 65536, 132).sk_reduce  # 1 block, 30 ways
    'spread'
    >>> cfg = quad_streamk(HopperConfig(tile_n=128), 1024, 1024, 16384, 132)  # 16 blocks
    >>> cfg.policy, cfg.cluster_m, cfg.cluster_n, cfg.sk_reduce, cfg.sk_ways
    ('streamk', 2, 2, 'owner', 0)
    """
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    _, spread = _quad_blocks(rows, cols, k_iters, sms)
    return cfg.replace(policy="streamk", cluster_m=2, cluster_n=2, sk_waves=1, sk_ways=0,
                       sk_reduce="spread" if spread else "owner")


def _off_rows_blocks(cfg: HopperConfig, m: int, n: int, k: int, dtype: str, sms: int, *,
                     b_rows_off: bool = False, b_rows_off_128: bool = False,
                     b_row_major: bool = False) -> HopperConfig:
    """A static 2-CTA cluster config (``cluster_m=2``) as 2 x 2 clusters (``cluster_n=2``: A
    multicast along the tile row too) where the blocks of 2 x 2 tiles run in no more waves of
    ``quad_clusters(sms)`` than the pairs in waves of ``sms // 2``, at most ``BLOCK_PAD`` of the
    blocks' CTAs sit on a tile column past N, and, where the width is one of
    ``SPLIT_OVER_BLOCKS`` (256), ``gemm_parts`` would not run the 2-CTA config as two launches
    (``tail_split``: ahead of 256-wide 2 x 2 clusters on all five shapes measured, but behind
    128-wide ones on ten of eleven); else ``cfg``.

    >>> off = dict(b_rows_off=True, a_rows_off_128=True)
    >>> cfg = choose_config(11248, 856, 1144, "float16", 132, **off)  # 88 x 4 tiles
    >>> cfg.cluster_m, cfg.cluster_n, cfg.tile_n
    (2, 2, 256)
    >>> choose_config(3424, 744, 2008, "float16", 132, **off).cluster_n  # 3 columns: 1 of 4 past N
    1
    """
    if (not OFF_ROWS_BLOCKS or (cfg.cluster_m, cfg.cluster_n, cfg.policy) != (2, 1, "static")
            or cfg.tile_m != TILE_M or sms < 4):
        return cfg
    cols = -(-n // cfg.tile_n)
    if cols % 2 and 1 / (cols + 1) > BLOCK_PAD:
        return cfg
    if _cluster_waves(m, n, cfg.tile_n, 2, sms)[0] > _cluster_waves(m, n, cfg.tile_n, 1, sms)[0]:
        return cfg
    if TAIL_SPLIT and cfg.tile_n in SPLIT_OVER_BLOCKS:
        # (the rest as when this was measured: 192-wide tiles stay; with 160-wide ones, a 1.15
        # launch of 2 x 2 clusters gave way to a 2 x 1 one, RESULTS.md, thirty-third session)
        split = tail_split(cfg, m, n, k, dtype, sms, b_rows_off=b_rows_off, b_rows_off_128=b_rows_off_128,
                           a_rows_off_128=True, same_columns=False, b_row_major=b_row_major)
        if split is not None and split[2] <= TAIL_SPLIT:
            return cfg
    return cfg.replace(cluster_n=2)


def _streamk_256_blocks(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or where it is static 128 x 256 tiles on 2 x 2 clusters, stream-K by how many
    waves of ``quad_clusters(sms)`` clusters their blocks fill:

    - at most ``QUAD_SK_256[0]`` of one wave, over at least ``QUAD_SK_256[1]`` k-iterations:
      stream-K over those blocks (``quad_streamk``), every cluster of the wave taking a k-range,
      where the static launch leaves a fifth or more of them idle.  Only where ``quad_streamk``
      gives the owner fix-up (each block split fewer than four ways), the fix-up it was measured
      with;
    - past one wave and below ``DUO_SK_256[2]`` waves (``MANY_WAVES`` prices longer launches),
      over at least ``DUO_SK_256[0]`` rows of tiles and ``DUO_SK_256[1]`` k-iterations: stream-K
      on 2 x 1 clusters (B multicast over each pair), ``sk_waves`` 1, the owner fix-up.  The 2 x 2
      launch leaves its last wave of blocks part empty and 12 of 132 SMs idle throughout; the
      pairs fill every SM and share the last waves' work out by k-ranges, but load A unshared
      (off: lost on sizes drawn after it was fitted).

    >>> cfg = HopperConfig(tile_n=256, policy="static", cluster_m=2, cluster_n=2)
    >>> q = _streamk_256_blocks(cfg, 1024, 2344, 7456, 132)  # 20 blocks of 30, 117 k-iterations
    >>> q.policy, q.cluster_m, q.cluster_n, q.sk_reduce
    ('streamk', 2, 2, 'owner')
    >>> _streamk_256_blocks(cfg, 512, 5496, 4104, 132).policy  # 65 k-iterations
    'static'
    >>> _streamk_256_blocks(cfg, 1352, 9128, 6928, 132).policy  # 3.6 waves of blocks (DUO_SK_256 off)
    'static'
    """
    if ((cfg.cluster_m, cfg.cluster_n, cfg.policy, cfg.tile_n) != (2, 2, "static", 256)
            or cfg.pingpong or cfg.tile_m != TILE_M):
        return cfg
    blocks, slots, k_iters = _block_waves(cfg, m, n, k, sms)
    if QUAD_SK_256 is not None and blocks <= QUAD_SK_256[0] * slots and k_iters >= QUAD_SK_256[1]:
        quad = quad_streamk(cfg, m, n, k, sms)
        if quad.sk_reduce == "owner":
            return quad
    if DUO_SK_256 is not None:
        rows_least, steps_least, waves_below = DUO_SK_256
        if (slots < blocks < waves_below * slots and -(-m // cfg.tile_m) >= rows_least
                and k_iters >= steps_least):
            return cfg.replace(policy="streamk", cluster_n=1, sk_waves=1, sk_ways=0, sk_reduce="owner")
    return cfg


def _launch_cost(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> float:
    """``_config_cost``; for stream-K over clusters (``quad_streamk``) ``_config_cost`` on the SMs
    the clusters hold (``quad_clusters``); for another cluster config of 2 x ``cluster_n`` CTAs
    ``_cluster_cost`` at its width's ``OFF_ROWS_CLUSTERS`` cost."""
    if cfg.cluster_size == 1:
        return _config_cost(cfg, m, n, k, sms)
    if cfg.policy == "streamk":
        held = quad_clusters(sms) * 4 if cfg.cluster_size == 4 else sms // cfg.cluster_size * cfg.cluster_size
        return _config_cost(cfg, m, n, k, held)
    per_column = {w: c for w, _, c in OFF_ROWS_CLUSTERS}.get(cfg.tile_n, 1.0)
    return _cluster_cost(m, n, cfg.tile_n, per_column, sms, cfg.cluster_n)


def tail_split(cfg: HopperConfig, m: int, n: int, k: int, dtype: str, sms: int, *,
               b_rows_off: bool = False, b_rows_off_128: bool = False, a_rows_off_128: bool = False,
               same_columns: bool = True, b_row_major: bool = False):
    """Where a static cooperative launch of ``cfg`` runs two waves or more and its last wave is
    short, and K has ``TAIL_SPLIT_MIN_K_STEPS`` steps or more (a second launch's fixed costs): the
    rows ``m1`` that fill all waves but the last (whole tile rows, whole pairs of them with
    clusters of 2 x 1 or 2 x 2 CTAs), the config ``choose_config`` picks for the other ``m - m1``
    rows without the one-wave rule (``OFF_ROWS_ONE_WAVE``, whose wider tiles the model prices above
    the ones they replace; ``same_columns=False``: before its last rule, ``_same_columns_160``), and
    the wave-cost model's estimate of both launches over that of the one (``_launch_cost``).  None where there
    is no such split, or where the rest would run the thin pingpong tile (which the model does not
    price).  Pure.  ``gemm_parts`` runs the two launches where ``cfg`` is a 2 x 1 cluster config
    (the ones measured ahead; split 2 x 2 launches were mixed, RESULTS.md, twenty-fourth session)
    and the ratio is at most ``TAIL_SPLIT``.

    On the H200 (RESULTS.md, twenty-third session, float16): of 21 shapes timed both ways, the four
    with a ratio of at most 0.875 were 0.05-0.11 of cuBLAS faster split (4992x1784x6440 0.77 ->
    0.88, 3000³ 0.74 -> 0.80); from 0.92 on the split was -0.09..+0.04 (the second launch's own
    fill and fixed costs, which the model does not see), -0.28 where the model puts it above 1.
    On 14 cluster shapes drawn after that where the ratio is at most 0.9, the split was ahead on
    13 (geomean 0.78 -> 0.84; 1760x5384x8800 0.82 -> 0.93) and behind on one by 0.06.  Since the
    fifty-fourth session the heuristic runs most such launches as stream-K over their last two
    waves instead (``CLUSTER_TAIL_SK``, which was ahead of these splits), so the split applies
    where the last wave holds 0.9 of the busiest cluster's blocks or more, or with that rule off.
    The static clusters of the example below are the heuristic's with the rule off:

    >>> off = dict(b_rows_off=True, b_rows_off_128=True)  # N = 1784: rows of 3568 bytes
    >>> cfg = choose_config(4992, 1784, 6440, "float16", 132, **off).replace(policy="static")
    >>> cfg.cluster_m, cfg.tile_n  # 20 pairs of tile rows x 7 columns: 140 clusters on 66
    (2, 256)
    >>> m1, rest, ratio = tail_split(cfg, 4992, 1784, 6440, "float16", 132, **off)
    >>> m1, rest.policy, round(ratio, 3)  # two waves' rows, then the rest split along K
    (4608, 'streamk', 0.746)
    """
    if (cfg.policy != "static" or cfg.pingpong or cfg.tile_m != TILE_M or cfg.cluster_m > 2
            or -(-k // 64) < TAIL_SPLIT_MIN_K_STEPS):
        return None
    rows = cfg.tile_m * cfg.cluster_m
    if cfg.cluster_m == 1:
        waves, slots, cols = _waves(m, n, cfg.tile_n, sms), sms, -(-n // cfg.tile_n)
    else:
        waves, slots, cols = _cluster_waves(m, n, cfg.tile_n, cfg.cluster_n, sms)
    m1 = (waves - 1) * slots // cols * rows
    if waves < 2 or not 0 < m1 < m:
        return None
    pick = choose_config if same_columns else _choose_config
    rest = pick(m - m1, n, k, dtype, sms, b_rows_off=b_rows_off, b_rows_off_128=b_rows_off_128,
                a_rows_off_128=a_rows_off_128, one_wave=False, b_row_major=b_row_major)
    if rest.pingpong:
        return None
    ratio = ((_launch_cost(cfg, m1, n, k, sms) + _launch_cost(rest, m - m1, n, k, sms))
             / _launch_cost(cfg, m, n, k, sms))
    return m1, rest, ratio


@functools.lru_cache(maxsize=1024)
def _tail_split_cached(cfg: HopperConfig, m: int, n: int, k: int, dtype: str, sms: int, *,
                       b_rows_off: bool = False, b_rows_off_128: bool = False, a_rows_off_128: bool = False,
                       b_row_major: bool = False):
    return tail_split(cfg, m, n, k, dtype, sms, b_rows_off=b_rows_off, b_rows_off_128=b_rows_off_128,
                      a_rows_off_128=a_rows_off_128, b_row_major=b_row_major)


def _thin_config(base: HopperConfig, m: int, n: int, k: int, sms: int, shared: bool) -> HopperConfig:
    """The thin product's pingpong config (``choose_config``): ``base`` (``THIN_TILE``) with the
    policy ``fit_policy`` picks; for float16 and bfloat16 past one wave of its tiles, the tiles
    twice as long along the long side where they run static or over K of at least
    ``THIN_LONG[2]`` steps (``THIN_LONG``); and below one wave but more than half, static, with
    fewer than 64 rows, the longer tiles split-K ``THIN_LONG_SPLIT`` ways.

    >>> _thin_config(HopperConfig(input="float16", tile_m=64, tile_n=64, stages=12, pingpong=True),
    ...              16, 8192, 8192, 132, False).sk_ways
    2
    """
    thin = fit_policy(base, m, n, k, sms, shared=shared)
    if not THIN_LONG or base.input not in ("float16", "bfloat16"):
        return thin
    long, stages, sk_steps = THIN_LONG
    tiles = _tiles(m, n, base.tile_n, base.tile_m)
    if tiles > sms:
        longer = fit_policy(base.replace(stages=stages, **({"tile_n": long} if m <= base.tile_m else {"tile_m": long})),
                            m, n, k, sms, shared=shared)
        return longer if longer.policy != "streamk" or -(-k // base.tile_k) >= sk_steps else thin
    if THIN_LONG_SPLIT and not shared and m < base.tile_m and thin.policy == "static" and 2 * tiles > sms:
        return thin.replace(tile_n=long, stages=stages, policy="streamk", sk_ways=THIN_LONG_SPLIT,
                            sk_reduce="owner", sk_waves=1)
    return thin


def _tiles(m: int, n: int, tile_n: int, tile_m: int = TILE_M) -> int:
    """Output tiles of ``tile_m`` x ``tile_n`` over an ``m × n`` product (edges rounded up)."""
    return -(-m // tile_m) * -(-n // tile_n)


def _waves(m: int, n: int, tile_n: int, sms: int) -> int:
    """Waves of one 128 x ``tile_n`` tile per SM that cover an ``m × n`` product on ``sms`` SMs."""
    return -(-_tiles(m, n, tile_n) // sms)


def _static_width(cfg: HopperConfig, width: int, stages: int, k: int) -> HopperConfig:
    """``cfg`` as static 128 x ``width`` tiles on ``stages`` stages (at most ``FEW_STAGES_K[1]``
    for K of at most ``FEW_STAGES_K[0]`` steps), with the TMA-store epilogue for K of at most
    ``TMA_STORE_K`` steps where the width's rows are whole 128-byte boxes (else "staged"), as
    ``choose_config`` gives its first tile: a width taken on the way (224) does not decide it."""
    if -(-k // 64) <= FEW_STAGES_K[0]:
        stages = min(stages, FEW_STAGES_K[1])
    wide = cfg.replace(tile_n=width, stages=stages, policy="static", sk_reduce="owner", sk_waves=1,
                       epilogue="staged")
    return wide.replace(epilogue="tma") if -(-k // 64) <= TMA_STORE_K and wide.out_chunk_bytes % 128 == 0 else wide


def _cheapest_waves(cfg: HopperConfig, m: int, n: int, k: int, sms: int,
                    b_row_major: bool = False) -> HopperConfig:
    """``cfg``, or static waves of the ``CHEAPEST_WIDTHS`` tile that costs least where that is
    cheaper: than ``SK_GIVE_WAY`` times stream-K over ``cfg``'s tile (its tiles' columns shared
    evenly over ``sms``, times ``SK_OVERHEAD``), or, for K of ``FILL_MIN_K_STEPS`` steps or more,
    than ``cfg``'s own static waves by ``STATIC_GAIN``.  A static launch of 128 x w tiles costs
    its waves times w times ``WAVE_COST[w]``.  Up to ``CHEAPEST_MAX_WAVES`` waves, cooperative
    tiles only, not stream-K over the last wave alone (``sk_waves=0``, many waves of 256-wide
    tiles).

    On the H200 (benchmarks/RESULTS.md, nineteenth session, float16 × cuBLAS): of 48 shapes
    drawn at random, the heuristic ran stream-K on 19, where its CTAs took 1.15-1.24 (K 4096-16384;
    1.40 and 1.64 on two) and 1.44-1.77 (K 256-512) times the time an even share of the tiles
    predicts; the static waves this rule now takes there ran 0.63-0.74 -> 0.80-0.94 at K = 256 and
    512 (1616x1776x512 0.63 -> 0.94, 1232x2528x256 0.63 -> 0.88) and 1648x1936x16384 0.59 -> 0.92,
    while stream-K stayed ahead where an even share costs at most 0.81 of the cheapest static
    waves (2288x2016x4096 0.82 against 0.73).  Static to static: 2112x2848x2048 0.89 -> 0.98
    (128 -> 192 wide), 1520x2400x8192 0.88 -> 0.95 (256 -> 224).  Then, on 26 shapes drawn where
    the rule fires and seven measured in earlier sessions, fp16 and bf16: ahead in 65 of 66 runs
    (geomean 0.76 -> 0.89): stream-K -> static at K = 256 and 512 by 0.08-0.31 (928x3040x256
    0.58-0.62 -> 0.87-0.93), at K 1024-16384 by up to 0.25 (864x3488x16384 0.68-0.71 -> 0.90-0.91;
    832x3472x16384 0.95 -> 0.93 in fp16, the one loss), static -> static by 0.01-0.10 (one wave
    of 224 against one of 256: 1536x2432x8192 0.96 -> 1.05; 3936x1424x2048 0.92-0.93 -> 1.02-1.03).
    Static waves that cost a little more than stream-K's estimate were ahead too (twenty-sixth
    session: 5472x832x2584 0.66 -> 0.80 at 1.03 times it, 2616x848x15568 0.68 -> 0.81 at 1.05),
    while stream-K stayed ahead at 0.93 (2288x2016x4096): so ``SK_GIVE_WAY`` = 1.06; on 14 shapes
    drawn where that margin decides, fp16 and bf16: ahead in 26 of 28 runs (geomean 0.69 ->
    0.78-0.79; 744x3088x6264 0.77-0.79 -> 1.05-1.09), behind by 0.06 on 2944x1664x7552.
    Static to static over more than four waves (twenty-seventh session): 2144x11840x1368, 12
    waves of 128-wide tiles, 0.79 -> 0.94 for 8 waves of 192; on 14 shapes drawn after the cap
    went from 4 to ``CHEAPEST_MAX_WAVES`` where it changes the config (3-8 waves before), fp16 /
    bf16, as ``gemm_parts`` runs them: geomean 0.78 -> 0.87 / 0.78 -> 0.85, ahead in 24 of 28 runs
    (4672x2576x13064 0.54 -> 0.75, 8800x1328x10104 0.56-0.57 -> 0.71-0.74, 3568x6272x1000 0.89-0.90
    -> 0.99), behind by 0.01-0.03 on 13136x2064x1944 (2-CTA clusters of 256 before) and
    3064x4352x1088 (128 wide with TMA stores before, 224 staged).

    >>> cfg = choose_config(1616, 1776, 512, "float16", 132)  # 182 tiles of 128: 130 of 192
    >>> cfg.tile_n, cfg.policy, cfg.epilogue
    (192, 'static', 'tma')
    >>> choose_config(1648, 1936, 16384, "float16", 132).tile_n  # 117 tiles of 224, one wave
    224
    >>> choose_config(2288, 2016, 4096, "float16", 132).policy  # 288 tiles: three waves static
    'streamk'
    """
    if not CHEAPEST_WIDTHS or cfg.pingpong or cfg.tile_m != TILE_M or cfg.tile_n not in WAVE_COST:
        return cfg
    steps = -(-k // 64)
    if cfg.policy == "streamk" and cfg.sk_waves == 1:
        limit = SK_GIVE_WAY * _config_cost(cfg, m, n, k, sms)
    elif (cfg.policy == "static" and steps >= FILL_MIN_K_STEPS
          and _waves(m, n, cfg.tile_n, sms) <= CHEAPEST_MAX_WAVES):
        limit = STATIC_GAIN * _config_cost(cfg, m, n, k, sms)
    else:
        return cfg
    cost, width, stages = _boxes_pick([(_static_cost(m, n, w, WAVE_COST[w], sms), w, st)
                                       for w, st in CHEAPEST_WIDTHS], n, k, b_row_major)
    if (cost > limit or _waves(m, n, width, sms) > CHEAPEST_MAX_WAVES
            or (width == cfg.tile_n and cfg.policy == "static")):
        return cfg
    return _static_width(cfg, width, stages, k)


def _streamk_256(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or, where it runs 16-bit static 128-row tiles narrower than 256 on single
    cooperative CTAs over more than one and at most two waves, with the staged epilogue, over K of
    at least ``SK_256_OVER_STATIC[1]`` steps: stream-K over 128 x 256 tiles, four stages, the
    owner fix-up, where the wave model prices that below ``SK_256_OVER_STATIC[0]`` times the static
    waves (``_config_cost``); on 2 x 1 clusters where pairing the rows of tiles pads at most
    ``SK_256_CLUSTER_PAD`` of them, else on single CTAs.  ``_cheapest_waves`` weighs stream-K on
    ``cfg``'s own tile only; over the wider tile a static launch's half-empty last wave becomes
    about a fifth of a wave.

    On the H200 (RESULTS.md, fifty-eighth session, × cuBLAS as a caller gets it, rule off -> on):
    five products of 128 x 192 static tiles at 1.58-1.67 waves first: where the model prices
    256-wide stream-K below the static waves, ahead on four (1176x4080x15768 0.66 -> 0.81,
    840x5712x14888 0.77 -> 0.86), and behind where it prices it above (4360x1040x10328, 0.71 ->
    0.63 as one launch).  Then twelve drawn where it changed a caller's launch (from 34 steps),
    fp16: from 64 steps ahead on six of seven by 0.04-0.15 (9528x512x16088 0.78 -> 0.93,
    4168x1200x13960 0.73 -> 0.85), behind by 0.02 on one (a transposed product); below 64 steps
    behind on four by 0.02-0.06 (816x5984x2144 0.85 -> 0.79), level on two, ahead on one.  So
    from 64 steps; on a fresh draw where that changed a caller's launch, ahead on all ten fp16 runs
    by 0.02-0.16 (geomean 0.78 -> 0.86; 1816x2768x15304 0.70 -> 0.86) and all six bf16 runs (0.80
    -> 0.87).  Priced against the exact widths (``exact_width``) where B is read K-major, which
    ``gemm_parts`` gives the static tiles there: 10632x432x4824, three exact columns of 144 (0.80)
    against two of 256 stream-K (0.70; RESULTS.md, fifty-ninth session).  The same stream-K on
    2 x 1 clusters, beside single CTAs, in two calls (fifty-eighth and fifty-ninth sessions): ahead
    on all six products whose rows of tiles pair with at most one row of CTAs in 35 idle, by
    0.04-0.13 (4360x1040x10328 0.63 -> 0.76, 2224x2144x6680 0.79 -> 0.86), behind on the two
    that pair 3 and 7 rows (359x13568x13632 0.89 -> 0.76, 840x5712x14888 0.85 -> 0.81).

    >>> cfg = HopperConfig(input="float16", tile_n=192, stages=4, epilogue="staged")
    >>> c = _streamk_256(cfg, 1176, 4080, 15768, 132)  # 220 tiles of 192: 160 of 256
    >>> c.tile_n, c.policy, c.sk_reduce, c.cluster_m
    (256, 'streamk', 'owner', 2)
    >>> _streamk_256(cfg, 840, 5712, 14888, 132).cluster_m  # 7 rows of tiles: single CTAs
    1
    >>> _streamk_256(cfg, 4360, 1040, 10328, 132) == cfg  # 175 tiles of 256, priced above
    True
    >>> _streamk_256(cfg, 816, 5984, 2144, 132) == cfg  # K of 34 steps
    True
    >>> kb = cfg.replace(b_k_major=True)  # B read K-major: 432 = three exact columns of 144
    >>> _streamk_256(kb, 10632, 432, 4824, 132) == kb
    True
    """
    if (SK_256_OVER_STATIC is None or cfg.input not in ("float16", "bfloat16")
            or cfg.policy != "static" or cfg.pingpong or cfg.tile_m != TILE_M
            or cfg.cluster_size != 1 or cfg.tile_n >= 256 or cfg.epilogue != "staged"
            or -(-k // 64) < SK_256_OVER_STATIC[1] or not 1 < _tiles(m, n, cfg.tile_n) / sms <= 2):
        return cfg
    wide = cfg.replace(tile_n=256, stages=4, policy="streamk", sk_waves=1, sk_reduce="owner")
    own = _config_cost(exact_width(cfg, n), m, n, k, sms)  # static tiles as a K-major B runs them
    if _config_cost(wide, m, n, k, sms) >= SK_256_OVER_STATIC[0] * own:
        return cfg
    rows = -(-m // TILE_M)
    if SK_256_CLUSTER_PAD is not None and rows % 2 <= SK_256_CLUSTER_PAD * rows:
        return wide.replace(cluster_m=2)
    return wide


def _mid_tile_pays(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> bool:
    """Whether ``MID_TILE`` (128x192) replaces the heuristic's 128-wide stream-K tile: where those
    tiles run over ``MID_WAVES`` waves of ``sms`` and the 192-wide ones pad no more columns (or,
    where the last row of tiles is at most half filled, at most n / 16 more, or where the 192-wide
    tiles fit in one wave and the 128-wide ones run ``ONE_WAVE_FROM`` waves or more; see below).  On
    the H200 (RESULTS.md, sixteenth session, fp16 and bf16 × cuBLAS, 128 -> 192 wide): 1024x2112x8192
    0.76-0.79 -> 0.88-0.90, 1280x2112x8192 0.77-0.80 -> 0.99, 2048x2112x8192 0.89-0.90 -> 0.99,
    1024x2304x8192, 2048x1152x8192 and 1536x1536 (K 8192 and 16384) 0.84-0.95 -> 0.89-0.97,
    768x3072x8192 0.91 -> 0.88 (the one loss measured where the rule takes 192); on seven shapes
    measured after the rule was written, 128 -> 192: 2048x1536x4096 0.78-0.79 -> 0.95-0.96,
    1152x2304x8192 0.89-0.90 -> 0.98, 640x4224x8192, 896x2688x8192, 1664x1536x8192 and
    2176x2112x8192 0.75-0.83 -> 0.83-0.87, 1280x1920x16384 0.89 -> 0.90.  128 wide stayed
    ahead where it fills a wave within 2 % (1152x1920x8192, 896x2432x8192), where 192 pads more
    (2304x1024x8192) and where one wave is whole (1408x1536x16384, 1024x2048x8192).  The
    timelines put the 128-wide tiles' loss in slower mainloops on the partly filled tiles and
    their CTAs' later exits (1088x2048x8192: 21 % of the warpgroups' time idle, against 6 %).
    So where the last row of 128-row tiles is at most half filled, 192 is taken even when it pads
    up to n / 16 more columns: fp16, 128 -> 192, 1088x2048x8192 0.73-0.74 -> 0.84-0.86,
    1344x2048x8192 0.81 -> 0.96, 960x2560x8192 0.73 -> 0.84, 1216x2048x4096 0.73 -> 0.85, and
    not on 2112x1024x8192 (12.5 % more columns: 0.81 -> 0.64).  That part of the rule was fitted
    to these five shapes.  On twenty shapes drawn at random afterwards (seventeenth session, fp16,
    each width launched after cuBLAS) the rule so far took 192 on ten: ahead by 0.02-0.24 on six,
    behind by 0.01-0.03 on four; of the ten it kept on 128, 128 was ahead on five (0.03-0.10),
    level on one, and behind on the four whose 192-wide tiles fit in one wave, even where those
    pad more columns: 2176x1216x2048 0.80 -> 0.98, 1664x1632x16384 0.87 -> 1.00, 1152x2144x8192
    0.88 -> 0.96, 1904x1408x8192 0.77 -> 0.83.  Beside them, one wave of 192-wide tiles lost where
    the 128-wide tiles ran at most 1.09 waves (2112x1024x8192 0.81 -> 0.64, 2304x1024x8192 0.88 ->
    0.82, 1648x1376x8192 0.80 -> 0.72, 1760x1248x8192 0.82 -> 0.78) and won from 1.16 waves on,
    2000x1184x4096 (0.70 -> 0.85) even with 13.5 % of its columns padded: so 192 is also taken
    where its tiles fit in one wave and the 128-wide ones run ``ONE_WAVE_FROM`` (1.15) waves or
    more, up to n / 6 padded columns (more was never measured)."""
    if cfg.tile_n != 128 or cfg.policy != "streamk" or cfg.pingpong or -(-k // 64) <= SHORT_K:
        return False
    tiles = _tiles(m, n, 128, cfg.tile_m)
    if not MID_WAVES[0] * sms <= tiles <= MID_WAVES[1] * sms:
        return False
    pad_mid, pad_128 = -(-n // MID_TILE[0]) * MID_TILE[0] - n, -(-n // 128) * 128 - n
    # a last row of tiles at most half filled slows the 128-wide tiles most: there 192 pays even
    # with up to n / 16 more padded columns; and one wave of 192-wide tiles beats stream-K over
    # ONE_WAVE_FROM waves or more of 128-wide tiles (192 padding at most n / 6 columns)
    one_wave = _tiles(m, n, MID_TILE[0], cfg.tile_m) <= sms
    return (pad_mid <= pad_128 or (0 < m % cfg.tile_m <= cfg.tile_m // 2 and pad_mid - pad_128 <= n // 16)
            or (one_wave and tiles >= ONE_WAVE_FROM * sms and pad_mid <= n // 6))


def _past_wave_192(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> bool:
    """Whether ``OFF_LINES_PAST_WAVE`` replaces ``cfg`` with one wave of static 128 x
    ``MID_TILE[0]`` tiles: ``cfg`` 128-wide stream-K tiles, one CTA a tile, cooperative, over K of
    more than ``SHORT_K`` steps, more than one wave of ``sms`` and fewer than
    ``OFF_LINES_PAST_WAVE`` waves, and the wider tiles fit in one wave; not over the sizes whose B
    ``copies_b_k_major`` may copy (at most ``B_K_MAJOR[0]`` columns, ``B_K_MAJOR[1]`` rows or more),
    where this config would decide between the copy and the transposed product (4560x472x6032:
    0.90 of cuBLAS transposed, 0.85 on the copy).  (The caller checks that B's rows are off
    128-byte lines.)

    >>> base = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk")
    >>> _past_wave_192(base, 1136, 1872, 7320, 132), _past_wave_192(base, 1024, 2048, 8192, 132)
    (True, False)
    >>> _past_wave_192(base, 2560, 1536, 4096, 132)  # 240 tiles: 1.8 waves
    False
    """
    if (OFF_LINES_PAST_WAVE is None or cfg.tile_n != 128 or cfg.policy != "streamk" or cfg.pingpong
            or cfg.cluster_size > 1 or -(-k // 64) <= SHORT_K):
        return False
    if _b_k_major_shape(m, n):
        return False  # where B may be copied K-major (copies_b_k_major): the copy's and swap's rules
    tiles = _tiles(m, n, 128, cfg.tile_m)
    return sms < tiles < OFF_LINES_PAST_WAVE * sms and _tiles(m, n, MID_TILE[0], cfg.tile_m) <= sms


def fit_policy(config: HopperConfig, m: int, n: int, k: int, sms: int, *,
               shared: bool = False) -> HopperConfig:
    """``config`` with the policy and stream-K fix-up the heuristic picks for its tile on an
    ``m × n × k`` product: ``choose_policy`` over its tile count, and the "spread" fix-up where
    stream-K splits each tile four or more ways (cooperative consumers only).

    >>> fit_policy(HopperConfig(tile_n=128), 256, 256, 65536, 132).sk_reduce
    'spread'
    >>> fit_policy(HopperConfig(tile_n=64, pingpong=True, tile_m=64), 64, 8192, 8192, 132).policy
    'static'

    One partial wave at least half full (``sms / 2 <= tiles < sms``) runs static, one tile per
    CTA, where ``choose_policy`` would split it: on the H200 (RESULTS.md, seventeenth session,
    sixteen shapes drawn at random, fp16 / bf16 × cuBLAS, stream-K -> static) every 128-wide case
    gained (1920x800x8192 0.61 -> 0.86, 1408x1072x16384 0.74 -> 0.89, 2112x432x4096 1.02 -> 1.17,
    eight of eight, +0.02 to +0.25), and 128x192 tiles gained up to K = 4096 (960x2368x2048 0.68
    -> 0.83, 1072x1952x4096 0.85 -> 0.92, five of five), tied at K = 8192 (two) and lost at
    K = 16384 (1280x1856x16384 0.90 -> 0.86); the twenty-sixth session saw static ahead at K =
    4360 and 4680 too (528x3984x4360 0.66 -> 0.79, 6400x272x4680 0.71 -> 0.77): so 192-wide
    tiles keep stream-K past ``PARTIAL_WAVE_STATIC_K`` (96) 64-wide steps.  Stream-K's CTAs
    start their K loops at different offsets, which costs each one's mainloop 8-25 %
    (benchmarks/FINDINGS.md, "In step or apart").

    >>> fit_policy(HopperConfig(tile_n=128), 1920, 800, 8192, 132).policy  # 105 tiles
    'static'
    >>> fit_policy(HopperConfig(tile_n=192), 1280, 1856, 16384, 132).policy  # 100 tiles, long K
    'streamk'

    Fewer tiles than half the SMs run static too unless K has more 64-wide steps than
    ``FEW_TILES_SK[0]`` times a CTA's even share of the tile-steps plus ``FEW_TILES_SK[1]``, or
    more than ``FEW_TILES_SK[2]``.  On the H200 (RESULTS.md, nineteenth session, fp16, twelve
    shapes of 9-59 128x128 tiles) the split cost about 17 us + 0.6 us per step of a CTA's share,
    one static wave 8 us + 0.3 us per step of K: stream-K -> static 112x7168x1024 0.56 -> 0.83,
    128x5840x1024 0.51 -> 0.79, 304x2224x4096 0.63 -> 0.71 of cuBLAS, while stream-K stayed ahead
    from K = 8192 (4208x80x8192 0.84 against 0.67, 3888x112x16384 0.94 against 0.61) and on few
    tiles with long K (256x256x65536).  On nineteen shapes drawn after the rule, fp16 and bf16,
    static was ahead in 34 of 38 runs (geomean 0.55 -> 0.77; 1184x640x256 0.56 -> 0.98,
    1024x1024x512 0.50-0.59 -> 0.90-0.97) and behind on 1536x592x8192 (0.78 -> 0.70, 128 steps:
    hence the cap) and 1024x1024x4096 (0.68-0.70 -> 0.66-0.68).

    >>> fit_policy(HopperConfig(tile_n=128), 112, 7168, 1024, 132).policy  # 56 tiles, 16 steps
    'static'
    >>> fit_policy(HopperConfig(tile_n=128), 4208, 80, 8192, 132).policy  # 33 tiles, 128 steps
    'streamk'

    Many waves of 256-wide tiles with a partial last one (``MANY_WAVES``) take stream-K over the
    partial wave alone, after the whole ones (``sk_waves=0``, ``_many_waves``): on the H200 (RESULTS.md, fourteenth
    session, fp16 × cuBLAS) 6144³ 0.98 against 0.97 static, 8192³ 0.98-1.00 against 0.96-0.98
    (bf16 1.00 against 0.98), 10240³ 1.01 against 0.98; at 4096³ (3.9 waves) static stays ahead,
    0.96 against 0.94.

    >>> cfg = fit_policy(HopperConfig(tile_n=256), 8192, 8192, 8192, 132)
    >>> cfg.policy, cfg.sk_waves, cfg.sk_reduce
    ('streamk', 0, 'owner')
    """
    rows, cols, k_iters = schedule.tile_grid(m, n, k, config.tile_m, config.tile_n, config.tile_k)
    tiles = rows * cols
    policy = choose_policy(tiles, sms, k_iters, shared)
    if (policy == "streamk" and not config.pingpong and sms <= 2 * tiles < 2 * sms
            and (config.tile_n == 128 or (config.tile_n == MID_TILE[0] and k_iters <= PARTIAL_WAVE_STATIC_K))):
        policy = "static"  # one partial wave, at least half full: see the docstring
    if (policy == "streamk" and not config.pingpong and 2 * tiles < sms and k_iters <= FEW_TILES_SK[2]
            and k_iters <= FEW_TILES_SK[0] * tiles * k_iters / sms + FEW_TILES_SK[1]):
        policy = "static"  # few tiles, K too short for the split to pay: see the docstring
    if policy == "static" and not shared:
        many = _many_waves(config.replace(policy=policy), m, n, k, sms)
        if many.policy == "streamk":  # the owner fix-up even on a few split tiles (_many_waves)
            return many
    # Tiles split four or more ways add their partials through every contributor ("spread"):
    # 256x256x65536 (4 tiles, ~33 contributors each) 0.59-0.60 of cuBLAS against 0.35-0.37 for
    # the owner adding them alone; split two or three ways the owner is faster (H200, RESULTS.md).
    split = schedule.streamk_tiles(rows * cols, sms, k_iters, config.sk_waves)
    spread = policy == "streamk" and not config.pingpong and sms >= 4 * split
    return config.replace(policy=policy, sk_reduce="spread" if spread else "owner")


def _many_waves(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> HopperConfig:
    """``cfg``, or, where ``MANY_WAVES`` holds for its static 256-wide tiles (one CTA each or
    clusters of a ``MANY_WAVES_CLUSTERS`` shape, counted in the clusters' blocks over the clusters
    a wave holds), stream-K over the partial last wave alone, with the owner fix-up: where that
    wave's few tiles had four or more contributors each, single CTAs ran 0.02-0.05 faster on it than
    on the spread fix-up (4968x6080x5880 0.90 -> 0.92, 12032x4928x4160 0.91 -> 0.96, fp16).

    On the H200 (RESULTS.md, forty-seventh session, fp16 × cuBLAS) over 2-CTA clusters:
    5640x5328x6320 (7.3 waves of blocks, 99 K steps) 0.90 -> 0.94, 2560x16080x6920 (9.5, 109)
    0.95 -> 0.97, 14864x8784x5136 (31.3, 81) 0.95 -> 0.97; at fewer steps level or behind
    (2136x8680x3664 4.6 waves, 58 steps 0.91 / 0.91; 11608x3504x2168 34 steps 0.96 -> 0.94;
    2112x9592x1152 18 steps 0.85 -> 0.80).  On 18 sizes drawn as a user types them where the rule
    changes the launch (2-CTA clusters and single CTAs, fp16 and bf16): ahead in 16 by 0.01-0.07,
    level in two (geomean fp16 0.930 -> 0.960, bf16 0.942 -> 0.963); over 2 x 2 clusters ahead by
    0.01 on six of eight, level on two.

    >>> cfg = HopperConfig(tile_n=256, policy="static", cluster_m=2)
    >>> _many_waves(cfg, 5640, 5328, 6320, 132).sk_waves, _many_waves(cfg, 2136, 8680, 3664, 132).policy
    (0, 'static')
    """
    shape = (cfg.cluster_m, cfg.cluster_n)
    if (MANY_WAVES is None or cfg.policy != "static" or cfg.pingpong or cfg.tile_n != 256
            or shape not in MANY_WAVES_CLUSTERS):
        return cfg
    units, slots, k_iters = _block_waves(cfg, m, n, k, sms)
    if units >= MANY_WAVES[0] * slots and units % slots and k_iters >= MANY_WAVES[1]:
        return cfg.replace(policy="streamk", sk_waves=0, sk_reduce="owner")
    return cfg


def _block_waves(cfg: HopperConfig, m: int, n: int, k: int, sms: int) -> tuple[int, int, int]:
    """(blocks, clusters a wave holds, k-iterations) of ``cfg`` on an ``m × n × k`` product: its
    blocks of ``cluster_m`` x ``cluster_n`` tiles (``_blocks``; tiles on single CTAs) and the
    wave-cost model's clusters a wave of ``sms`` SMs holds (``_wave_clusters``, at least one)."""
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    return _blocks(cfg, rows, cols), max(1, _wave_clusters(cfg.cluster_m, cfg.cluster_n, sms)), k_iters


def tma_buffers(cfg: HopperConfig, m: int, n: int, sms: int) -> HopperConfig:
    """``cfg``, or where it is a 16-bit, cooperative 128 x 256 config of one CTA a cluster on 4
    stages storing through TMA with one staging buffer set, ``TMA_BUFFERS``' stages and buffer
    sets, for an ``m x n`` output on ``sms`` SMs whose tiles run past one wave
    (``TMA_BUFFERS_PAST_WAVE``): what ``gemm_parts`` runs where it picked ``cfg`` and the output
    takes the bulk stores.  A
    warpgroup's 256 columns go out as two 256-byte chunks; with one buffer the second waits for the
    first's stores to have read it, with two it does not, and the second buffer takes the fourth
    stage's room.  On the H200 it was ahead on eight squares of K 384-2048 (by 0.01-0.04 of
    cuBLAS; 12288x12288x768 0.92 -> 0.96) and in 11 of 16 runs on sizes drawn as a user types
    them, level in two, behind by 0.01 in three (RESULTS.md, forty-third session).  Clusters keep
    one buffer: their 3-stage rows were behind in 13 of 16 runs (forty-second session).  One wave
    keeps 4 stages and one buffer (``TMA_BUFFERS_PAST_WAVE``): each CTA has one tile, whose
    mainloop the fourth stage feeds and whose stores no next tile waits on.  On eight sizes drawn
    where that changes the launch (H100, RESULTS.md, seventy-fifth session; 120-132 tiles), ahead
    in 7 of 16 runs by 0.01-0.06 of cuBLAS (360x11072x1896 0.89-0.90 -> 0.95-0.96), level within
    0.01 in 8, behind in one by 0.03 (296x11000x1360 fp16); geomean fp16 0.914 -> 0.922, bf16
    0.908 -> 0.926.

    >>> cfg = HopperConfig(input="float16", tile_n=256, stages=4, epilogue="tma")
    >>> tma_buffers(cfg, 4096, 4096, 132).out_buffers, tma_buffers(cfg, 624, 6064, 132).out_buffers
    (2, 1)
    >>> tma_buffers(cfg.replace(tile_n=128), 4096, 4096, 132).out_buffers
    1
    >>> tma_buffers(cfg.replace(cluster_m=2), 4096, 4096, 132).out_buffers
    1
    """
    if (TMA_BUFFERS is None or cfg.input not in ("float16", "bfloat16") or cfg.epilogue != "tma"
            or cfg.tile_n != 256 or cfg.tile_m != TILE_M or cfg.pingpong or cfg.stages != 4
            or cfg.out_buffers != 1 or cfg.cluster_size > 1):
        return cfg
    if TMA_BUFFERS_PAST_WAVE and _tiles(m, n, cfg.tile_n, cfg.tile_m) <= sms:
        return cfg  # one wave: no next tile for the second buffer to start
    stages, buffers = TMA_BUFFERS
    return cfg.replace(stages=stages, out_buffers=buffers)


@functools.lru_cache(maxsize=1024)
def _choose_cached(m: int, n: int, k: int, dtype: str, sms: int, allow_tf32: bool,
                   b_rows_off: bool = False, b_rows_off_128: bool = False,
                   a_rows_off_128: bool = False, one_wave: bool = True, b_row_major: bool = False) -> HopperConfig:
    return choose_config(m, n, k, dtype, sms, allow_tf32=allow_tf32, b_rows_off=b_rows_off,
                         b_rows_off_128=b_rows_off_128, a_rows_off_128=a_rows_off_128, one_wave=one_wave,
                         b_row_major=b_row_major)
