// The on-device tile scheduler of the persistent GEMM: one interface (`next(WorkUnit&)`), one small
// type per policy. mgemm/schedule.py mirrors every policy unit for unit; keep the two in step.
#pragma once

namespace mgemm {

// One piece of work: tile `tile` of the grouped order (at `row`, `col` of the tile grid), over the
// k-iterations [k_begin, k_end).  A unit with k_begin == 0 and k_end == k_iters is a whole tile.
struct WorkUnit {
  int tile, row, col, k_begin, k_end;
};

struct TileGrid {
  int rows, cols, tiles, k_iters;
};

// Per-launch state that lives in global memory: the dynamic policy's ticket counter (zeroed by
// the launcher before each launch) and how many tiles the stream-K tail splits.
struct SchedArgs {
  int* counter;
  int sk_tiles;
};

// The grouped (swizzled) order, as mgemm.schedule.grouped_tile: bands of `group` rows, walked down
// a column inside the band before moving right.  RasterN is the transpose (bands of columns).
__device__ __forceinline__ void grouped_tile_m(int t, int rows, int cols, int group, int& r, int& c) {
  group = group < rows ? group : rows;
  group = group > 1 ? group : 1;
  const int per_band = group * cols;
  const int band = t / per_band, within = t % per_band;
  const int first = band * group;
  const int height = rows - first < group ? rows - first : group;
  r = first + within % height;
  c = within / height;
}

template <int Group, bool RasterN>
__device__ __forceinline__ WorkUnit make_unit(const TileGrid& g, int t, int k_begin, int k_end) {
  WorkUnit w;
  w.tile = t;
  if (RasterN) grouped_tile_m(t, g.cols, g.rows, Group, w.col, w.row);
  else grouped_tile_m(t, g.rows, g.cols, Group, w.row, w.col);
  w.k_begin = k_begin;
  w.k_end = k_end;
  return w;
}

// per_tile: grid = tiles, CTA b computes tile b.  The non-persistent baseline.
template <int Group, bool RasterN>
struct PerTileScheduler {
  static constexpr bool kSplitsK = false;
  TileGrid g;
  bool taken;
  __device__ PerTileScheduler(const TileGrid& grid, const SchedArgs&) : g(grid), taken(false) {}
  __device__ bool next(WorkUnit& w) {
    if (taken || (int)blockIdx.x >= g.tiles) return false;
    taken = true;
    w = make_unit<Group, RasterN>(g, blockIdx.x, 0, g.k_iters);
    return true;
  }
};

// static: grid = SMs x occupancy, CTA b computes tiles b, b + grid, b + 2 grid, ...
template <int Group, bool RasterN>
struct StaticScheduler {
  static constexpr bool kSplitsK = false;
  TileGrid g;
  int t;
  __device__ StaticScheduler(const TileGrid& grid, const SchedArgs&) : g(grid), t(blockIdx.x) {}
  __device__ bool next(WorkUnit& w) {
    if (t >= g.tiles) return false;
    w = make_unit<Group, RasterN>(g, t, 0, g.k_iters);
    t += gridDim.x;
    return true;
  }
};

// dynamic: each CTA takes the next ticket of a global counter, so CTAs that start late (their SM
// was busy with another kernel) simply take fewer tiles.  Every thread of the CTA calls next().
template <int Group, bool RasterN>
struct DynamicScheduler {
  static constexpr bool kSplitsK = false;
  TileGrid g;
  int* counter;
  int parity;
  __device__ DynamicScheduler(const TileGrid& grid, const SchedArgs& a)
      : g(grid), counter(a.counter), parity(0) {}
  __device__ bool next(WorkUnit& w) {
    // Two slots, alternating, so one barrier per tile suffices: a slot is rewritten only after
    // the barrier of the next call, which every thread passes after reading it.
    __shared__ int ticket[2];
    if (threadIdx.x == 0) ticket[parity] = atomicAdd(counter, 1);
    __syncthreads();
    const int t = ticket[parity];
    parity ^= 1;
    if (t >= g.tiles) return false;
    w = make_unit<Group, RasterN>(g, t, 0, g.k_iters);
    return true;
  }
};

// stream-K tail: the first tiles - sk_tiles tiles go grid-stride as in `static`; the k-iterations
// of the last sk_tiles tiles are split evenly over the CTAs, CTA b taking the global iterations
// [sk_begin(b), sk_begin(b + 1)).  A CTA walks its range from the end, so a unit that stops short
// of its tile's last iteration (a contributor: it writes a partial) comes first, and the unit that
// ends the tile (the owner: it waits for the partials of lower CTAs and adds them) comes last.
// `me` of `ctas` is the CTA's place in that split: blockIdx.x of gridDim.x, or (the Hopper kernel's
// clusters) the cluster's of all clusters, each cluster splitting a grid of tile blocks.
template <int Group, bool RasterN>
struct StreamKScheduler {
  static constexpr bool kSplitsK = true;
  TileGrid g;
  int me, ctas, dp_tiles, next_dp;
  long long sk_iters, begin, cur;
  __device__ StreamKScheduler(const TileGrid& grid, const SchedArgs& a)
      : StreamKScheduler(grid, a, blockIdx.x, gridDim.x) {}
  __device__ StreamKScheduler(const TileGrid& grid, const SchedArgs& a, int me_, int ctas_)
      : g(grid), me(me_), ctas(ctas_) {
    dp_tiles = g.tiles - a.sk_tiles;
    next_dp = me;
    sk_iters = (long long)a.sk_tiles * g.k_iters;
    begin = sk_begin(me);
    cur = sk_begin(me + 1);
  }
  __device__ long long sk_begin(int cta) const { return sk_iters * cta / ctas; }
  // The CTA whose range holds global stream-K iteration x: the largest c with sk_begin(c) <= x.
  __device__ int cta_of(long long x) const {
    return (int)(((x + 1) * ctas + sk_iters - 1) / sk_iters) - 1;
  }
  // First global stream-K iteration of the tile of unit w (w must be a stream-K unit).
  __device__ long long tile_start(const WorkUnit& w) const {
    return (long long)(w.tile - dp_tiles) * g.k_iters;
  }
  __device__ bool next(WorkUnit& w) {
    if (next_dp < dp_tiles) {
      w = make_unit<Group, RasterN>(g, next_dp, 0, g.k_iters);
      next_dp += ctas;
      return true;
    }
    if (cur <= begin) return false;
    const long long t = (cur - 1) / g.k_iters;
    const long long ts = t * g.k_iters;
    const long long kb = begin > ts ? begin : ts;
    w = make_unit<Group, RasterN>(g, dp_tiles + (int)t, (int)(kb - ts), (int)(cur - ts));
    cur = kb;
    return true;
  }
};

}  // namespace mgemm
