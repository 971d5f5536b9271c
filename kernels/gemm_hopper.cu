// The Hopper (sm_90a) persistent GEMM: D = alpha * A @ B + beta * C with TMA loads into a ring of
// shared-memory stages, one producer warpgroup and two consumer warpgroups running wgmma, and the
// tile schedulers of tile_scheduler.cuh.  Knobs are compile-time constants set by name
// (mgemm/hopper_config.py renders the #defines; the defaults below are for nvcc).
//
// Roles (384 threads, warpgroup = 128 threads):
//   warpgroup 0, thread 0 (producer): walks the schedule, publishes each work unit to the
//     consumers through a small ring of unit slots, and for every k-iteration waits for an empty
//     stage, then issues two TMA loads (A: 128 x BK, B: BN x BK) that complete on the stage's
//     "full" barrier.  The rest of warpgroup 0 has nothing to do and leaves after giving up
//     registers.  Because the producer runs ahead, the next tile's loads overlap the epilogue.
//   warpgroups 1 and 2 (consumers): rows 0-63 and 64-127 of the tile (64-row tiles without
//     pingpong, kSplitN: all 64 rows, each warpgroup half the columns; wide 128-row tiles, kWide,
//     TILE_N 288-384: all 128 rows as two m64 blocks, each warpgroup half the columns).  Per k-iteration: wait for
//     a full stage, BK/16 wgmma m64nBNk16 (BK/8 m64nBNk8 for tf32), commit; keep one group in
//     flight and free the previous stage on its "empty" barrier.  Then the epilogue straight from
//     the accumulator registers, masked at the edges; stream-K partials go through the workspace.
//
// Shared memory (dynamic, aligned up to 1024 bytes): stage s = [A: 128 rows x 128 B][B: BN rows x
// 128 B], every row 128 bytes of K in the 128-byte swizzle (see hopper_ptx.cuh: sw128_desc), then
// the barriers and the unit slots.  That is the K-major layout (A row-major, B column-major).
// 16-bit inputs may also be MN-major (MGEMM_A_K_MAJOR 0: A column-major, M contiguous;
// MGEMM_B_K_MAJOR 0: B row-major, N contiguous): the operand's part of the stage is then
// (rows / 64, rounded up) boxes of [BK rows of K x 128 B = 64 m or n], 8 KB each, one TMA load per
// box, read by wgmma with the transpose bit and sw128_mn_desc.  tf32 is K-major only (mgemm/hopper.py copies).
//
// Clusters (MGEMM_CLUSTER_M 2 or 4, MGEMM_CLUSTER_N 1 or 2, at most 4 CTAs; opt-in; static,
// per_tile and stream-K, cooperative consumers): the CTAs of a cluster (__cluster_dims__(size, 1, 1),
// consecutive blockIdx.x) take a block of CLUSTER_M x CLUSTER_N adjacent tiles (stream-K: the same
// k-range of each tile of a block).  The CTAs of one
// tile column share their B tile, those of one tile row their A tile: each producer loads its own
// part of B (1 / CLUSTER_M; K-major: BN / CLUSTER_M rows; MN-major: that share of the 64-wide
// boxes) and of A (1 / CLUSTER_N) and multicasts each to the CTAs that share it, into the same
// stage offset and onto the same "full" barrier offset, so every CTA's full barrier still counts
// the whole stage's bytes.  A stage is refilled only when the consumers of every CTA of the
// cluster have released it: every releasing warp arrives on the "empty" barrier of its own CTA and
// of each peer (mapa + a remote arrive, CTA-scope release), size times the count.  Where the tile
// rows (columns) are not a multiple of CLUSTER_M (CLUSTER_N), the CTAs past the last one load
// boxes wholly out of bounds (TMA writes zeros and still counts the box's bytes, as for every edge
// box here), multiply zeros and mask every element in the epilogue.  Barrier setup ends with a
// cluster barrier (peers arrive on and multicast to this CTA's barriers), and so does the kernel:
// no CTA leaves while a peer may still arrive on its barriers.
#include "hopper_ptx.cuh"
#include "knobs.cuh"
#include "tile_scheduler.cuh"

// Named values of this kernel's own knobs (the shared ones are in knobs.cuh).
#define MGEMM_EPILOGUE_DIRECT 0
#define MGEMM_EPILOGUE_PAIR 1
#define MGEMM_EPILOGUE_STAGED 2
#define MGEMM_EPILOGUE_TMA 3
#define MGEMM_EPILOGUE_COLUMNS 4
#define MGEMM_SK_REDUCE_OWNER 0
#define MGEMM_SK_REDUCE_SPREAD 1

#ifndef MGEMM_INPUT
#define MGEMM_INPUT MGEMM_BF16  // what A and B hold: MGEMM_F16, MGEMM_BF16 or MGEMM_TF32 (float32)
#endif
#ifndef MGEMM_OUTPUT
#define MGEMM_OUTPUT MGEMM_BF16  // what C and D hold
#endif
#ifndef MGEMM_TILE_N
// 64, 128, 256, or 96, 160, 192, 224 (cooperative, one CTA per tile): the wgmma N; the tile is
// 128 x TILE_N x (128 bytes of K)
#define MGEMM_TILE_N 128
#endif
#ifndef MGEMM_STAGES
#define MGEMM_STAGES 4
#endif
#ifndef MGEMM_POLICY
#define MGEMM_POLICY MGEMM_POLICY_STATIC
#endif
#ifndef MGEMM_GROUP
#define MGEMM_GROUP 8
#endif
#ifndef MGEMM_RASTER
#define MGEMM_RASTER MGEMM_RASTER_M
#endif
#ifndef MGEMM_TIMELINE
// debug: each consumer warpgroup logs, per work unit, when it took the unit, finished its
// mainloop and was done with it (fix-up and epilogue), and when the CTA started and it left,
// from the GPU's global nanosecond timer (cooperative consumers, one CTA per tile; not with RECORD)
#define MGEMM_TIMELINE 0
#endif
#ifndef MGEMM_RECORD
#define MGEMM_RECORD 0  // debug: log (cta, tile, k_begin, k_end) of every work unit
#endif
#ifndef MGEMM_EPILOGUE
// DIRECT: one store per element; PAIR: the two adjacent columns a thread holds as one 4-byte
// (16-bit output) or 8-byte (float32) access wherever the output (and C) is row-major with an
// even leading dimension and aligned, element-wise elsewhere and at the last odd column; STAGED:
// with beta == 0 and a row-major output whose rows start 16-byte aligned, each consumer warpgroup
// writes its rows, 64 at a time, through its own 16 KB shared-memory buffer, 256 bytes of each row
// at a time, and stores them as 16-byte accesses that cover whole rows (PAIR elsewhere); TMA: as
// STAGED, the buffer laid out as 128-byte-swizzled boxes of 64 rows x 128 bytes, which one thread
// of the warpgroup stores with bulk tensor stores (the output's descriptor: kernel parameter
// tma_d) while the warpgroup goes on (PAIR elsewhere); COLUMNS: as STAGED for a column-major
// output (the transposed product's: D^T row-major), the buffer holding 64-row columns, stored as
// 16-byte accesses that cover whole 64-row pieces of the output's columns (element-wise elsewhere).
#define MGEMM_EPILOGUE MGEMM_EPILOGUE_PAIR
#endif
#ifndef MGEMM_A_K_MAJOR
#define MGEMM_A_K_MAJOR 1  // 1: A row-major (K contiguous); 0: A column-major (M contiguous, 16-bit only)
#endif
#ifndef MGEMM_B_K_MAJOR
#define MGEMM_B_K_MAJOR 1  // 1: B column-major (K contiguous); 0: B row-major (N contiguous, 16-bit only)
#endif
#ifndef MGEMM_PINGPONG
// 0 (cooperative): both consumer warpgroups work on every tile, 64 rows each.  1 (pingpong): each
// consumer warpgroup owns whole tiles in turn (units 0, 2, 4, ... to warpgroup 0; 1, 3, 5, ... to
// warpgroup 1), its mainloop ordered after the other's by named barriers, so that one warpgroup's
// epilogue runs under the other's wgmmas.
#define MGEMM_PINGPONG 0
#endif
#ifndef MGEMM_TILE_M
#define MGEMM_TILE_M 128  // rows of a tile: 128 (cooperative); 64 or 128 (pingpong: m64 wgmmas per k16)
#endif
#ifndef MGEMM_PRODUCER_REGS
#define MGEMM_PRODUCER_REGS 40  // setmaxnreg of the producer warpgroup
#endif
#ifndef MGEMM_CONSUMER_REGS
#define MGEMM_CONSUMER_REGS 232  // setmaxnreg of the consumer warpgroups (128 P + 256 C <= 65536)
#endif
#ifndef MGEMM_OVERLAP
// 1 (cooperative, static / dynamic / per_tile, at most 96 accumulators a thread): two accumulator
// sets; each tile's epilogue runs after the next tile's first wgmmas are issued, under them,
// instead of between the two mainloops.  0: one set, each epilogue between two mainloops.
#define MGEMM_OVERLAP 0
#endif
#ifndef MGEMM_OUT_BUFFERS
// TMA epilogue of an even number of chunks per warpgroup row: 2 gives each consumer warpgroup two
// staging buffers, odd chunks through the second, so that a chunk waits only for the bulk stores
// of the chunk before last to have read its buffer, not for those of the chunk just stored.  1: one
// buffer, each chunk's stores read before the next chunk is written.
#define MGEMM_OUT_BUFFERS 1
#endif
#ifndef MGEMM_SK_REDUCE
// Stream-K fix-up of a split tile.  OWNER: the CTA that ends the tile adds the other contributors'
// partials to its registers, one after another.  SPREAD (cooperative consumers): every
// contributor writes its partial, waits for all of them, adds its share of the tile's elements
// over all partials and stores that share: the adding goes through all the tile's SMs instead of
// one, for tiles split many ways (few tiles, long K).
#define MGEMM_SK_REDUCE MGEMM_SK_REDUCE_OWNER
#endif
#ifndef MGEMM_SPLIT_ONLY
// 1 (SK_REDUCE SPREAD): every unit of the launch is a split tile (the launcher checks: a whole
// tile traps), so the binary has no whole-tile epilogue and the fix-up's code follows the
// mainloop instead of lying past it: less code to fetch on a cold start.
#define MGEMM_SPLIT_ONLY 0
#endif
#ifndef MGEMM_PLAIN_OUT
// 1 (STAGED, TMA or COLUMNS epilogue): the launch has beta == 0 and an output the epilogue's own
// path takes (the launcher checks: anything else traps), so the binary leaves out the paired and
// element-wise fallbacks, most of its code.
#define MGEMM_PLAIN_OUT 0
#endif
#ifndef MGEMM_K_PARTS
// K held as this many separate parts (A and B each as that many tensors, one TMA descriptor per
// part, a block task's K chunks): the producer walks them in order as one K range, every part
// beginning on a fresh k-iteration (a part whose K is not a multiple of BK ends in a zero-filled
// box), so the parts accumulate in registers instead of through the output.
#define MGEMM_K_PARTS 1
#endif
#ifndef MGEMM_OUT_COLS
#define MGEMM_OUT_COLS 0  // STAGED, TMA, COLUMNS: output columns staged at a time (0: the default chunk, kOutCols)
#endif
#ifndef MGEMM_PROMOTE
// 0: the wgmmas accumulate a work unit's whole K range in their registers.  P > 0 (cooperative
// consumers, TILE_N <= 192): they accumulate P k-iterations at a time into a second set of
// registers, which the consumers then add to the unit's accumulators with ordinary float32 adds
// (rounded to nearest).
// A tensor core's own float32 accumulation truncates, so its error grows with the number of k16
// steps it adds up; windows of P k-iterations bound that growth, for float32 products emulated
// with bfloat16 pieces (mgemm/emulate.py), at the cost of waiting for the wgmmas once per window.
#define MGEMM_PROMOTE 0
#endif
#ifndef MGEMM_CLUSTER_M
// 1: one CTA per tile; 2 or 4: clusters of CTAs on vertically adjacent tiles that multicast B
// (static, per_tile or stream-K, cooperative consumers, TILE_N 128 or 256; 4 with an MN-major B: 256)
#define MGEMM_CLUSTER_M 1
#endif
#ifndef MGEMM_CLUSTER_N
// 1, or 2: clusters also span two horizontally adjacent tiles, which multicast A (the same
// conditions; CLUSTER_M x CLUSTER_N at most 4)
#define MGEMM_CLUSTER_N 1
#endif

namespace mgemm {
namespace hopper {

// The configuration, by name: the single place where macros become C++.
struct Config {
  using In = StorageOf<MGEMM_INPUT>::type;
  using Out = StorageOf<MGEMM_OUTPUT>::type;
  static constexpr int kTileM = MGEMM_TILE_M, kTileN = MGEMM_TILE_N;
  static constexpr int kTileK = 128 / (int)sizeof(In);  // one 128-byte swizzle row of K
  static constexpr int kInstK = 32 / (int)sizeof(In);   // K of one wgmma: 16 (f16/bf16), 8 (tf32)
  static constexpr int kStages = MGEMM_STAGES, kGroup = MGEMM_GROUP;
  static constexpr bool kRasterN = MGEMM_RASTER == MGEMM_RASTER_N;
  static constexpr bool kRecord = MGEMM_RECORD;
  static constexpr bool kTimeline = MGEMM_TIMELINE;
  static constexpr bool kAKMajor = MGEMM_A_K_MAJOR, kBKMajor = MGEMM_B_K_MAJOR;
  static constexpr bool kPairEpilogue = MGEMM_EPILOGUE != MGEMM_EPILOGUE_DIRECT;  // STAGED falls back to it
  // STAGED and TMA both stage the output through shared memory; TMA stores it with bulk stores
  static constexpr bool kTmaStore = MGEMM_EPILOGUE == MGEMM_EPILOGUE_TMA;
  static constexpr bool kStagedEpilogue = MGEMM_EPILOGUE == MGEMM_EPILOGUE_STAGED || kTmaStore;
  static constexpr bool kColumnsEpilogue = MGEMM_EPILOGUE == MGEMM_EPILOGUE_COLUMNS;
  static constexpr bool kSpreadFixUp = MGEMM_SK_REDUCE == MGEMM_SK_REDUCE_SPREAD;
  static constexpr bool kSplitOnly = MGEMM_SPLIT_ONLY;
  static constexpr bool kPlainOut = MGEMM_PLAIN_OUT;
  static_assert(!kPlainOut || kStagedEpilogue || kColumnsEpilogue, "PLAIN_OUT: a staged, TMA or columns epilogue");
  static_assert(!kSplitOnly || kSpreadFixUp, "SPLIT_ONLY: the spread fix-up");
  static constexpr bool kPingpong = MGEMM_PINGPONG;
  static constexpr bool kOverlap = MGEMM_OVERLAP;
  static constexpr int kOutBuffers = MGEMM_OUT_BUFFERS;  // TMA: staging buffer sets, used by alternate chunks
  // m64 row blocks one consumer warpgroup multiplies per k16 step: 1 (cooperative: its half of the
  // tile), kTileM / 64 (pingpong: the whole tile).
  static constexpr int kMBlocks = kPingpong ? kTileM / 64 : 1;
  // Cooperative 64-row tiles (TILE_M 64 without pingpong) split along N: both consumer warpgroups
  // multiply the tile's 64 rows of A, each by its own half of B's columns (kWgN of them).
  static constexpr bool kSplitN = !kPingpong && kTileM == 64;
  // Wide tiles (cooperative, 128 rows, TILE_N past 256, a K-major B): both consumer warpgroups
  // multiply all 128 rows of A (two m64 blocks), each by its own half of B's columns, so a tile can
  // span a narrow product's whole N (288 = 2 x 144 ... 384 = 2 x 192) and A is read once.
  static constexpr bool kWide = !kPingpong && kTileM == 128 && kTileN > 256;
  static constexpr bool kWgColumns = kSplitN || kWide;  // each warpgroup its own half of the columns
  static constexpr int kWgN = kWgColumns ? kTileN / 2 : kTileN;  // the columns of one warpgroup's wgmmas
  // m64 blocks of a cooperative warpgroup's accumulators: its 64 rows (1), or all 128 (wide: 2)
  static constexpr int kCoopBlocks = kWide ? 2 : 1;
  static constexpr int kProducerRegs = MGEMM_PRODUCER_REGS, kConsumerRegs = MGEMM_CONSUMER_REGS;
  static constexpr int kClusterM = MGEMM_CLUSTER_M;  // a cluster's CTAs along M (on one column of tiles)
  static constexpr int kClusterN = MGEMM_CLUSTER_N;  // ... and along N (on one row of tiles)
  static constexpr int kClusterSize = kClusterM * kClusterN;
  static constexpr int kKParts = MGEMM_K_PARTS;      // K parts, one descriptor pair each
  static constexpr int kPromote = MGEMM_PROMOTE;     // k-iterations per promoted window (0: none)
  static constexpr int kMnBox = 64;            // MN-major: elements of M or N per box (128 bytes)
  static constexpr int kMnBoxBytes = kMnBox * 128;  // one MN-major box: BK rows of 128 bytes

  static constexpr int kConsumers = 2, kConsumerThreads = 128 * kConsumers;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kUnits = 4;                   // unit slots between producer and consumers
  static constexpr int kAcc = kWgN / 2;              // fp32 accumulators per thread per m64 block
  static constexpr int kCoopAcc = kCoopBlocks * kAcc;  // ... and of a cooperative consumer thread
  // Arrivals that free a stage: one per warp of the warpgroups that read it (both, or its owner),
  // in every CTA of the cluster (a stage holds parts of A and B that peers' producers multicast).
  static constexpr int kEmptyArrivals = (kPingpong ? 128 : kConsumerThreads) / 32 * kClusterSize;
  // Named barriers (0 is __syncthreads; 1 is consumer_sync, all 256 consumer threads): pingpong's
  // math turn of warpgroup w is kTurnBar + w (256 threads: w waits, the other arrives); its own
  // 128-thread barrier (stream-K fix-up) is kWgBar + w, which the STAGED epilogue uses too.
  static constexpr int kTurnBar = 2, kWgBar = 4;
  // B's part of a stage holds whole 64-wide MN-major boxes: a tile width that is an odd multiple of
  // 32 (96, 160, 224) loads one box more than half used (its other columns belong to the next tile
  // or lie past N, zero-filled, and no wgmma reads them).  K-major B loads exactly kTileN rows; an
  // exact width (an odd multiple of 16: 144, 176, 208, 240; K-major B only), and a wide tile (K-major
  // B only), holds only those.
  static constexpr bool kExactWidth = kTileN % 32 != 0;
  static constexpr bool kExactWgN = kWgN % 32 != 0;  // a warpgroup's columns an exact width (staged: whole rows)
  static constexpr int kBRows = kExactWidth || kWide ? kTileN : (kTileN + kMnBox - 1) / kMnBox * kMnBox;
  static constexpr int kABytes = kTileM * 128, kBBytes = kBRows * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // the bytes the TMA loads of one stage write (its "full" barrier's transaction count)
  static constexpr int kStageLoadBytes = kABytes + (kBKMajor ? kTileN : kBRows) * 128;
  // the part of B one CTA loads and multicasts: its share of the 64-wide boxes (MN-major), or of the
  // kTileN rows a K-major B loads (contiguous from the stage's B, where the wgmmas read them)
  static constexpr int kBPartBytes = (kBKMajor ? kTileN : kBRows) * 128 / kClusterM;
  // K-major B's rows per TMA box: a CTA's part in one box, or (a wide tile's part past the 256 rows
  // a box may hold) a warpgroup's columns per box
  static constexpr int kBBoxRows = kTileN / kClusterM <= 256 ? kTileN / kClusterM : kWgN;
  static constexpr int kAPartBytes = kABytes / kClusterN;  // ... and of A
  static constexpr int kSharedBytes = 512;           // barriers and unit slots, after the ring
  // STAGED epilogue: per consumer warpgroup 64 rows of kOutCols output columns (256 bytes; the
  // whole row of the warpgroup's kWgN columns when narrower; 128 bytes when the row is not a whole
  // number of 256-byte chunks, as 192 16-bit columns are; half the row when it is not a whole
  // number of 128-byte chunks either, as 160 or 224 16-bit columns are; the whole row of an exact
  // width, whose half would not be a whole number of 32 bytes), after the barrier area;
  // the warpgroup's columns go through in kOutChunks.  Rows of a whole number of 128 bytes
  // permute their 16-byte pieces by XOR with the row (the TMA's 128-byte swizzle), others rotate
  // them by the row (kOutRotate).
  static constexpr int kRowBytes = kWgN * (int)sizeof(Out);
  static constexpr int kOutCols = MGEMM_OUT_COLS > 0 ? MGEMM_OUT_COLS
                                  : (kRowBytes <= 256 || kExactWgN ? kRowBytes : kRowBytes % 256 == 0 ? 256
                                     : kRowBytes % 128 == 0 ? 128 : kRowBytes / 2) / (int)sizeof(Out);
  static constexpr int kOutPitch = kOutCols * (int)sizeof(Out);  // bytes per staged row
  static constexpr bool kOutRotate = kOutPitch % 128 != 0;
  static constexpr int kOutChunks = kWgN / kOutCols;
  // COLUMNS stages the same kOutCols columns of 64 rows, as columns of kColBytes.
  static constexpr int kOutStageBytes = kStagedEpilogue || kColumnsEpilogue ? kConsumers * 64 * kOutPitch : 0;
  static constexpr int kColBytes = 64 * (int)sizeof(Out);
  // TMA: a box is 64 rows of 128 bytes (kOutBoxCols columns), 1024-byte aligned for the swizzle,
  // so the staging buffers start 1024 bytes after the ring (the barrier area padded).
  static constexpr int kOutBoxCols = 128 / (int)sizeof(Out), kOutBoxBytes = 64 * 128;
  static constexpr int kOutStageOffset = kStages * kStageBytes + (kTmaStore ? 1024 : kSharedBytes);
  // + 1024: the dynamic shared base is aligned up to 1024 bytes inside the kernel.
  static constexpr int kSmemBytes = 1024 + kOutStageOffset + kOutBuffers * kOutStageBytes;

  static_assert((kTileN % 32 == 0 || (kTileN % 16 == 0 && kBKMajor && !kPingpong && kTileM == 128)) && kTileN >= 64 &&
                    (kTileN <= 256 || kWide),
                "TILE_N: a multiple of 32 from 64 to 256 (wide tiles: to 384); or of 16 (exact widths) over a K-major B, cooperative, 128 rows");
  static_assert(kTileN % 128 == 0 || kTileN == 64 || (!kPingpong && (kClusterSize == 1 || kBKMajor)),
                "TILE_N 96, 160, 192, 224: cooperative consumers, one CTA per tile or a K-major B");
  static_assert(kTileM == 64 || kTileM == 128, "TILE_M: 64 or 128");
  static_assert(!kSplitN || kTileN == 128 || kTileN == 256,
                "cooperative TILE_M 64 (split along N): TILE_N 128 or 256 (warpgroups of whole 64-wide boxes)");
  static_assert(kMBlocks * kAcc <= 128, "a pingpong warpgroup holds at most 128 accumulators per thread");
  // (352, two warpgroups of 176 columns, and the spread fix-up at 288 or 320 spill registers)
  static_assert(!kWide || ((kTileN == 288 || kTileN == 320 || kTileN == 384) && kBKMajor && !kSpreadFixUp),
                "wide TILE_N (288, 320, 384: two warpgroups of 144, 160, 192 columns): a K-major B, the owner fix-up");
  static_assert(kProducerRegs % 8 == 0 && kConsumerRegs % 8 == 0 && kProducerRegs >= 24 && kConsumerRegs <= 256 &&
                    128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 65536,
                "setmaxnreg: multiples of 8 in [24, 256] that fit the register file");
  static_assert(kStages >= 2, "the ring needs two stages at least");
  static_assert(!kOverlap || (!kPingpong && kCoopAcc <= 96 && kPromote == 0 && !kTimeline &&
                              MGEMM_POLICY != MGEMM_POLICY_STREAMK),
                "OVERLAP: cooperative consumers, at most 96 accumulators a thread (two sets), no PROMOTE or "
                "TIMELINE, a policy that splits no tile");
  static_assert(kOutBuffers == 1 || (kOutBuffers == 2 && kTmaStore && kOutChunks % 2 == 0),
                "OUT_BUFFERS 2: the TMA epilogue, an even number of chunks per warpgroup row");
  static_assert(kPromote >= 0 && (kPromote == 0 || (!kPingpong && kTileN <= 192)),
                "PROMOTE: cooperative consumers and TILE_N <= 192 (two accumulator sets per thread)");
  static_assert((kAKMajor && kBKMajor) || sizeof(In) == 2, "MN-major operands need 16-bit inputs (no tf32 transpose)");
  static_assert(sizeof(In) != 2 || kMnBoxBytes == kTileK * 128, "an MN-major box is BK rows of 128 bytes");
  static_assert(kSmemBytes <= 232448, "more than the 227 KB of shared memory a block may have");
  static_assert((kClusterM == 1 || kClusterM == 2 || kClusterM == 4) && (kClusterN == 1 || kClusterN == 2) &&
                    kClusterSize <= 4,
                "CLUSTER_M: 1, 2 or 4; CLUSTER_N: 1 or 2; at most 4 CTAs a cluster");
  // each CTA's part of B (of A): whole MN-major boxes, or K-major rows in whole 8-row swizzle atoms
  static_assert(kBKMajor ? kTileN % (8 * kClusterM) == 0 : (kBRows / kMnBox) % kClusterM == 0,
                "CLUSTER_M: B's part per CTA in whole boxes (MN-major B and CLUSTER_M 4: TILE_N 256)");
  static_assert(kAKMajor ? kTileM % (8 * kClusterN) == 0 : (kTileM / kMnBox) % kClusterN == 0,
                "CLUSTER_N: A's part per CTA in whole boxes");
  static_assert(kKParts >= 1 && kKParts <= 8, "K_PARTS: 1 to 8 (two descriptors each in the kernel parameters)");
  static_assert(!kSpreadFixUp || !kPingpong, "SK_REDUCE SPREAD: cooperative consumers (other policies split no tile)");
  static_assert(!kStagedEpilogue || (kOutPitch % 32 == 0 && kOutPitch >= 128),
                "staged rows: an even number of 16-byte pieces, 8 at least");
  static_assert(!kTmaStore || !kOutRotate, "TMA store: staged rows of whole 128-byte boxes");
  static_assert(!kStagedEpilogue || kWgN % kOutCols == 0, "staged rows: a whole number of chunks per tile row");
  static_assert(MGEMM_OUT_COLS == 0 || kColumnsEpilogue || kStagedEpilogue,
                "OUT_COLS: the STAGED, TMA or COLUMNS epilogue's chunk");
  static_assert(!kColumnsEpilogue || (kWgN % kOutCols == 0 && kOutCols * (kColBytes / 16) % 128 == 0),
                "staged columns: a whole number of chunks per tile row, of whole 16-byte pieces per thread");
  static_assert(!kTmaStore || (kStageBytes % 1024 == 0 && kSharedBytes <= 1024), "TMA store boxes: 1024-byte aligned");
  static_assert(!kTimeline || (!kRecord && kClusterSize == 1),
                "TIMELINE: one CTA per tile, not with RECORD");
  static_assert(kClusterSize == 1 || (!kPingpong && !kRecord && (kTileN >= 128 || kClusterM == 1) &&
                                      (MGEMM_POLICY == MGEMM_POLICY_STATIC || MGEMM_POLICY == MGEMM_POLICY_PER_TILE ||
                                       MGEMM_POLICY == MGEMM_POLICY_STREAMK)),
                "clusters: cooperative consumers, static, per_tile or stream-K, no record, TILE_N 128 or more "
                "where B is multicast (CLUSTER_M > 1)");
};

#ifdef MGEMM_SMEM_BYTES  // the launcher's size must be the kernel's (mgemm/hopper_config.py smem_bytes)
static_assert(MGEMM_SMEM_BYTES == Config::kSmemBytes, "launcher and kernel disagree on shared memory");
#endif

// The operands of every K part (kernel parameters, __grid_constant__ so TMA reads them in place)
// and where each part's k-iterations end: part p covers [end[p - 1], end[p]) (end[-1] = 0) and
// its k-iteration kt loads K coordinate (kt - end[p - 1]) * BK of its own tensors.
struct TmaParts {
  TmaDesc d[Config::kKParts];
};
struct PartEnds {
  int end[Config::kKParts];
};

// The part holding k-iteration kt and the K coordinate of kt within it.
__device__ __forceinline__ int part_of(const PartEnds& ends, int kt, int& k0) {
  int part = 0, begin = 0;
#pragma unroll
  for (int p = 0; p + 1 < Config::kKParts; ++p)
    if (kt >= ends.end[p]) {
      part = p + 1;
      begin = ends.end[p];
    }
  k0 = (kt - begin) * Config::kTileK;
  return part;
}

// Barriers and the unit slots.  full[s]: one producer arrival + the stage's TMA bytes; empty[s]:
// one arrival per warp that reads the stage (every consumer warp; pingpong: the owner's 4);
// unit_full[u]: the producer; unit_empty[u]: every consumer thread (pingpong too).
struct Shared {
  unsigned long long full[Config::kStages], empty[Config::kStages];
  unsigned long long unit_full[Config::kUnits], unit_empty[Config::kUnits];
  WorkUnit units[Config::kUnits];
  long long t_posted;  // TIMELINE: when the producer posted the first unit
};
static_assert(sizeof(Shared) <= Config::kSharedBytes, "barrier area too small for this many stages");

// dynamic, for warp specialization: the producer thread alone takes tickets from the global
// counter (tile_scheduler.cuh's DynamicScheduler synchronizes the whole CTA on every call, which
// the roles here cannot do); the consumers receive the units through the slots.
template <int Group, bool RasterN>
struct ProducerDynamicScheduler {
  static constexpr bool kSplitsK = false;
  TileGrid g;
  int* counter;
  __device__ ProducerDynamicScheduler(const TileGrid& grid, const SchedArgs& a) : g(grid), counter(a.counter) {}
  __device__ bool next(WorkUnit& w) {
    const int t = atomicAdd(counter, 1);
    if (t >= g.tiles) return false;
    w = make_unit<Group, RasterN>(g, t, 0, g.k_iters);
    return true;
  }
};

// Clusters: every CTA of a cluster walks the same blocks of the grid of cluster blocks (CLUSTER_M
// tile rows x CLUSTER_N tile columns each; rows and columns rounded up, in the grouped order over
// that grid: Group counts rows of blocks), cluster-stride (static, the grid holds whole clusters)
// or one block per cluster (per_tile).  Rank r = rm + CLUSTER_M rn takes tile row CLUSTER_M b.row
// + rm and column CLUSTER_N b.col + rn (a tile past the grid's last row or column: its boxes lie
// wholly out of bounds, zero-filled, and its epilogue masks every element).  w.tile = size x
// block + rank names the unit (no record or stream-K reads it here).
__device__ __forceinline__ TileGrid cluster_blocks(const TileGrid& g) {
  TileGrid blocks;
  blocks.rows = (g.rows + Config::kClusterM - 1) / Config::kClusterM;
  blocks.cols = (g.cols + Config::kClusterN - 1) / Config::kClusterN;
  blocks.tiles = blocks.rows * blocks.cols;
  blocks.k_iters = g.k_iters;
  return blocks;
}

// Unit w of block (w.row, w.col) -> the tile of that block that cluster rank `rank` computes.
__device__ __forceinline__ void to_rank_tile(WorkUnit& w, int rank) {
  w.row = Config::kClusterM * w.row + rank % Config::kClusterM;
  w.col = Config::kClusterN * w.col + rank / Config::kClusterM;
}

template <int Group, bool RasterN, bool Persistent>
struct ClusterScheduler {
  static constexpr bool kSplitsK = false;
  TileGrid blocks;
  int t, rank;
  bool taken;
  __device__ ClusterScheduler(const TileGrid& g, const SchedArgs&)
      : blocks(cluster_blocks(g)), t(cluster_id_x()), rank(cluster_ctarank()), taken(false) {}
  __device__ bool next(WorkUnit& w) {
    if (t >= blocks.tiles || (!Persistent && taken)) return false;
    w = make_unit<Group, RasterN>(blocks, t, 0, blocks.k_iters);
    w.tile = Config::kClusterSize * t + rank;
    to_rank_tile(w, rank);
    taken = true;
    t += cluster_count_x();
    return true;
  }
};

// Clusters under stream-K: the tile blocks are what stream-K splits, over the clusters (`me` the
// cluster, `ctas` the clusters), so every CTA of a cluster walks the same k-ranges, each of its own
// tile of the block (as above).  Each rank's tiles are then one stream-K problem of their own, with
// its own partial slots (sk_slot_base); w.tile stays the block, which tile_start reads.
template <int Group, bool RasterN>
struct ClusterStreamKScheduler : StreamKScheduler<Group, RasterN> {
  using Base = StreamKScheduler<Group, RasterN>;
  int rank;
  __device__ ClusterStreamKScheduler(const TileGrid& g, const SchedArgs& a)
      : Base(cluster_blocks(g), a, cluster_id_x(), cluster_count_x()), rank(cluster_ctarank()) {}
  __device__ bool next(WorkUnit& w) {
    if (!Base::next(w)) return false;
    to_rank_tile(w, rank);
    return true;
  }
};

// The first stream-K partial slot of this CTA's rank, `per_rank` slots a rank (0 without clusters).
__device__ __forceinline__ int sk_slot_base(int per_rank) {
  return Config::kClusterSize > 1 ? cluster_ctarank() * per_rank : 0;
}

#if MGEMM_CLUSTER_M * MGEMM_CLUSTER_N > 1 && MGEMM_POLICY == MGEMM_POLICY_STREAMK
using Scheduler = ClusterStreamKScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_CLUSTER_M * MGEMM_CLUSTER_N > 1
using Scheduler = ClusterScheduler<Config::kGroup, Config::kRasterN, MGEMM_POLICY == MGEMM_POLICY_STATIC>;
#elif MGEMM_POLICY == MGEMM_POLICY_PER_TILE
using Scheduler = PerTileScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_STATIC
using Scheduler = StaticScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_DYNAMIC
using Scheduler = ProducerDynamicScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_STREAMK
using Scheduler = StreamKScheduler<Config::kGroup, Config::kRasterN>;
#endif

using In = Config::In;
using Out = Config::Out;
constexpr int kAcc = Config::kAcc;
constexpr int kCoopAcc = Config::kCoopAcc;

// Position in the ring, advanced once per k-iteration by producer and consumers alike: both walk
// the same units in the same order, so their (stage, phase) agree without talking.
struct RingPos {
  int stage = 0, phase = 0;
  __device__ void advance() {
    if (++stage == Config::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  // n advances at once (pingpong: the k-iterations of the other warpgroup's unit).
  __device__ void skip(int n) {
    const int s = stage + n;
    stage = s % Config::kStages;
    phase ^= (s / Config::kStages) & 1;
  }
};

// TIMELINE: entries of 10 long longs after the entry counter (record[0]; entries from record + 2,
// 8-byte aligned): (cta, consumer warpgroup, tile, k_begin, k_end, t_take, t_mainloop, t_done,
// t_stored, t_ready) per unit, in ns of the global timer; the last entry of each warpgroup has tile
// -1 and holds (.., t_start of the CTA, t_end of units, t_exit, t_wait: when the warpgroup began to
// wait for its first unit, t_posted: when the producer posted it).  Written by each consumer
// warpgroup's first thread.
struct Timeline {
  // per entry (mgemm.timeline.FIELDS): CTA, warpgroup, tile, k_begin, k_end, then ns stamps: taken,
  // mainloop done, done, partial stored (split units), every partial of the tile visible (units
  // this warpgroup reduced with the spread fix-up)
  static constexpr int kFields = 10;
  static constexpr int kStored = 8, kReady = 9;  // the fields callees stamp (Timeline::stamp)
  int* counter;
  long long* cur = nullptr;
  __device__ __forceinline__ static long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (long long)t;
  }
  __device__ __forceinline__ bool on() const { return Config::kTimeline && (threadIdx.x & 127) == 0; }
  // where a callee stamps field f of `entry` (the warpgroup's first thread of a timeline launch), else null
  __device__ __forceinline__ long long* stamp(long long* entry, int f) const {
    return on() && entry ? entry + f : nullptr;
  }
  // the warpgroup's exit entry (tile -1): its CTA's start, when its units ran out, its exit (now),
  // when it began to wait for its first unit and when the producer posted that unit
  __device__ __forceinline__ void leave(int wg, long long t_start, long long t_units, long long t_wait,
                                        long long t_posted) {
    open(wg, -1, 0, 0, t_start);
    cur[6] = t_units;
    cur[7] = now();
    cur[8] = t_wait;
    cur[9] = t_posted;
  }
  __device__ __forceinline__ void open(int wg, int tile, int k_begin, int k_end, long long t) {
    const int slot = atomicAdd(counter, 1);
    cur = reinterpret_cast<long long*>(counter + 2) + kFields * slot;
    cur[0] = blockIdx.x;
    cur[1] = wg;
    cur[2] = tile;
    cur[3] = k_begin;
    cur[4] = k_end;
    cur[5] = t;
    cur[6] = 0;
    cur[7] = 0;
    cur[8] = 0;
    cur[9] = 0;
  }
};

__device__ __forceinline__ void record_unit(int* record, const WorkUnit& w) {
  const int slot = atomicAdd(record, 1);
  int* r = record + 1 + 4 * slot;
  r[0] = blockIdx.x;
  r[1] = w.tile;
  r[2] = w.k_begin;
  r[3] = w.k_end;
}

// --- producer -------------------------------------------------------------------------------------

// A CTA's part of an operand's tile in a cluster: `Rows` rows of M or N from `mn0` at K coordinate
// k0 (K-major: Rows / Box boxes of Box x BK, the descriptor's box, one under the other; MN-major:
// Rows / 64 boxes of 64 x BK side by side), written into the stage at `dst` of every CTA of `mask`,
// completing on their barriers at `bar`'s offset.
template <bool KMajor, int Rows, int Box = Rows>
__device__ __forceinline__ void multicast_part(unsigned char* dst, const TmaDesc* desc, int k0, int mn0,
                                               unsigned long long* bar, unsigned short mask) {
  if constexpr (KMajor) {
#pragma unroll
    for (int j = 0; j < Rows / Box; ++j) tma_load_2d_multicast(dst + j * Box * 128, desc, k0, mn0 + j * Box, bar, mask);
  } else {
#pragma unroll
    for (int j = 0; j < Rows / Config::kMnBox; ++j)
      tma_load_2d_multicast(dst + j * Config::kMnBoxBytes, desc, mn0 + j * Config::kMnBox, k0, bar, mask);
  }
}

__device__ __forceinline__ void produce(const TmaParts& tas, const TmaParts& tbs, const PartEnds& ends,
                                        unsigned char* ring, Shared& sh, const TileGrid& g,
                                        const SchedArgs& args, int* record) {
  Scheduler sched(g, args);
  RingPos pos;
  // Clusters: this CTA loads part rm of B (of CLUSTER_M) and multicasts it to the CTAs of its
  // tile column (ranks rn CLUSTER_M + i), and part rn of A (of CLUSTER_N) to those of its tile
  // row (ranks rm + CLUSTER_M j).
  const int rank = Config::kClusterSize > 1 ? cluster_ctarank() : 0;
  const int rm = rank % Config::kClusterM, rn = rank / Config::kClusterM;
  const unsigned short b_mask = (unsigned short)(((1u << Config::kClusterM) - 1) << (rn * Config::kClusterM));
  unsigned short a_mask = 0;
#pragma unroll
  for (int j = 0; j < Config::kClusterN; ++j) a_mask |= (unsigned short)(1u << (rm + Config::kClusterM * j));
  for (int u = 0;; ++u) {
    WorkUnit w;
    const bool more = sched.next(w);
    const int slot = u % Config::kUnits;
    mbar_wait(&sh.unit_empty[slot], ((u / Config::kUnits) & 1) ^ 1);
    if (!more) w.tile = -1;  // the end: consumers stop at it
    if constexpr (Config::kTimeline)
      if (u == 0) sh.t_posted = Timeline::now();
    sh.units[slot] = w;
    mbar_arrive(&sh.unit_full[slot]);
    if (!more) return;
    if (Config::kRecord) record_unit(record, w);
    const int m0 = w.row * Config::kTileM, n0 = w.col * Config::kTileN;
    for (int kt = w.k_begin; kt < w.k_end; ++kt) {
      mbar_wait(&sh.empty[pos.stage], pos.phase ^ 1);  // released in every CTA of a cluster
      unsigned char* a = ring + pos.stage * Config::kStageBytes;
      mbar_arrive_expect_tx(&sh.full[pos.stage], Config::kStageLoadBytes);
      int k0;
      const int part = part_of(ends, kt, k0);
      const TmaDesc* ta = &tas.d[part];
      const TmaDesc* tb = &tbs.d[part];
      if constexpr (Config::kClusterN > 1) {  // this CTA's part of A, multicast along its tile row
        constexpr int kRows = Config::kTileM / Config::kClusterN;
        multicast_part<Config::kAKMajor, kRows>(a + rn * Config::kAPartBytes, ta, k0, m0 + rn * kRows,
                                                &sh.full[pos.stage], a_mask);
      } else if constexpr (Config::kAKMajor) {
        tma_load_2d(a, ta, k0, m0, &sh.full[pos.stage]);  // A as (M, K): box BK x 128
      } else {
#pragma unroll
        for (int j = 0; j < Config::kTileM / Config::kMnBox; ++j)  // A as (K, M): boxes 64 x BK
          tma_load_2d(a + j * Config::kMnBoxBytes, ta, m0 + j * Config::kMnBox, k0, &sh.full[pos.stage]);
      }
      if constexpr (Config::kClusterM > 1) {  // this CTA's part of B, multicast down its tile column
        constexpr int kCols = Config::kTileN / Config::kClusterM;
        multicast_part<Config::kBKMajor, kCols, Config::kBBoxRows>(a + Config::kABytes + rm * Config::kBPartBytes,
                                                                   tb, k0, n0 + rm * kCols, &sh.full[pos.stage], b_mask);
      } else if constexpr (Config::kBKMajor) {  // B^T as (N, K): box BK x BN (wide tiles: two, BK x BN / 2)
#pragma unroll
        for (int j = 0; j < Config::kTileN / Config::kBBoxRows; ++j)
          tma_load_2d(a + Config::kABytes + j * Config::kBBoxRows * 128, tb, k0, n0 + j * Config::kBBoxRows,
                      &sh.full[pos.stage]);
      } else {
#pragma unroll
        for (int j = 0; j < Config::kBRows / Config::kMnBox; ++j)  // B as (K, N): boxes 64 x BK
          tma_load_2d(a + Config::kABytes + j * Config::kMnBoxBytes, tb, n0 + j * Config::kMnBox, k0,
                      &sh.full[pos.stage]);
      }
      pos.advance();
    }
  }
}

// --- consumers ------------------------------------------------------------------------------------

// The u-th work unit, handed over by the producer through the unit slots (every consumer thread
// reads it and arrives on the slot's "empty" barrier).
__device__ __forceinline__ WorkUnit take_unit(Shared& sh, int u) {
  const int slot = u % Config::kUnits;
  mbar_wait(&sh.unit_full[slot], (u / Config::kUnits) & 1);
  const WorkUnit w = sh.units[slot];
  mbar_arrive(&sh.unit_empty[slot]);
  return w;
}

// Frees a stage for the producer(s): one arrival per consumer warp on its "empty" barrier, and in a
// cluster on every peer's too (peers' producers multicast into this CTA's stage; the CTA on the
// other diagonal of a 2 x 2 cluster does not, and waits for this one all the same).
__device__ __forceinline__ void release_stage(unsigned long long* empty) {
  mbar_arrive(empty);
  if constexpr (Config::kClusterSize > 1) {
    const int me = cluster_ctarank();
#pragma unroll
    for (int r = 1; r < Config::kClusterSize; ++r) mbar_arrive_remote(empty, me ^ r);
  }
}

// release_stage by the threads where `p` holds: one CTA's as a predicated arrival (no branch).
__device__ __forceinline__ void release_stage_if(bool p, unsigned long long* empty) {
  if constexpr (Config::kClusterSize > 1) {
    if (p) release_stage(empty);
  } else {
    mbar_arrive_if(p, empty);
  }
}

// m64 block j of a cooperative thread's accumulators (wide tiles: rows 64 j .. 64 j + 63 of the
// tile; else the only one), as the array a wgmma or the staged epilogue takes.
__device__ __forceinline__ float (&acc_block(float (&acc)[kCoopAcc], int j))[kAcc] {
  return *reinterpret_cast<float(*)[kAcc]>(acc + j * kAcc);
}
__device__ __forceinline__ const float (&acc_block(const float (&acc)[kCoopAcc], int j))[kAcc] {
  return *reinterpret_cast<const float(*)[kAcc]>(acc + j * kAcc);
}

// The wgmma descriptor of an operand's k16 (tf32: k8) step `kk` in a stage at shared address `base`:
// K-major, the next step is 32 bytes further along each swizzled row; MN-major, 16 rows (two
// 1024-byte atoms) further down each box.
template <bool KMajor>
__device__ __forceinline__ unsigned long long operand_desc(unsigned base, int kk) {
  return KMajor ? sw128_desc(base + 32 * kk) : sw128_mn_desc(base + 2048 * kk, Config::kMnBoxBytes);
}

// Waits for the ring's current stage and issues this warpgroup's wgmmas over it into `d` (the first
// k16 step ignores d's old value unless `keep`), as one committed group.
__device__ __forceinline__ void issue_k_iteration(float (&d)[kCoopAcc], unsigned char* ring, Shared& sh, int wg,
                                                  const RingPos& pos, int keep) {
  mbar_wait(&sh.full[pos.stage], pos.phase);
  // This warpgroup's 64 rows of A: 64 K-major rows of 128 bytes, or (MN-major) box `wg`; both 8 KB
  // in.  Split along N (and wide tiles): all of A (wide: m64 block j at 8 KB j), and the
  // warpgroup's kWgN columns of B (K-major: kWgN rows of 128 bytes; MN-major: kWgN / 64 boxes of
  // 8 KB; either way kWgN * 128 bytes in).
  const unsigned a = smem_addr(ring + pos.stage * Config::kStageBytes) + (Config::kWgColumns ? 0 : wg * 64 * 128);
  const unsigned b = smem_addr(ring + pos.stage * Config::kStageBytes + Config::kABytes) +
                     (Config::kWgColumns ? wg * Config::kWgN * 128 : 0);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Config::kTileK / Config::kInstK; ++kk) {
    const unsigned long long db = operand_desc<Config::kBKMajor>(b, kk);
#pragma unroll
    for (int j = 0; j < Config::kCoopBlocks; ++j) {
      const unsigned long long da = operand_desc<Config::kAKMajor>(a + j * 64 * 128, kk);
      wgmma_ss<Config::kAKMajor ? 0 : 1, Config::kBKMajor ? 0 : 1>(acc_block(d, j), da, db, kk > 0 || keep, Tag<In>());
    }
  }
  wgmma_commit();
}

// mainloop with MGEMM_PROMOTE P: the wgmmas of each window of P k-iterations (the last one
// shorter) accumulate into `part` (the window's first k16 step overwrites it: scale_d 0); at the
// window's end the consumers wait for them and add `part` to `acc`.  Inside a window a stage is
// freed once the next k-iteration's group is issued (as in mainloop); at its end the last one is.
// The windows are the outer loop, so the adds sit on a path every thread takes: under a branch,
// ptxas serialized the wgmmas (C7518).
__device__ __forceinline__ void promoted_mainloop(float (&acc)[kCoopAcc], unsigned char* ring, Shared& sh,
                                                  int nk, int wg, RingPos& pos, bool releaser) {
  constexpr int kWindow = Config::kPromote > 0 ? Config::kPromote : 1;  // (compiled, unused, at 0)
  float part[kCoopAcc];
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) part[i] = 0.f;
  for (int w0 = 0; w0 < nk; w0 += kWindow) {
    const int len = min(kWindow, nk - w0);
    int prev = 0;
    for (int i = 0; i < len; ++i) {
      issue_k_iteration(part, ring, sh, wg, pos, i > 0);
      if (i > 0) {  // the group before this one is done: its stage may be refilled
        wgmma_wait<1>();
        if (releaser) release_stage(&sh.empty[prev]);
      }
      prev = pos.stage;
      pos.advance();
    }
    wgmma_wait<0>();  // the window is done: promote it
    fence_regs(part);
#pragma unroll
    for (int j = 0; j < kCoopAcc; ++j) acc[j] += part[j];
    if (releaser) release_stage(&sh.empty[prev]);
  }
  fence_regs(acc);
}

// acc = the rows [64 wg, 64 wg + 64) of A_tile @ B_tile (split along N and wide tiles: all rows,
// the warpgroup's columns) over `nk` k-iterations of the ring.
__device__ __forceinline__ void mainloop(float (&acc)[kCoopAcc], unsigned char* ring, Shared& sh, int nk, int wg,
                                         RingPos& pos) {
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) acc[i] = 0.f;
  if (nk <= 0) return;
  const bool releaser = (threadIdx.x & 31) == 0;  // one arrival per consumer warp frees a stage
  if constexpr (Config::kPromote > 0) {
    promoted_mainloop(acc, ring, sh, nk, wg, pos, releaser);
    return;
  }
  int prev = 0;
  for (int i = 0; i < nk; ++i) {
    issue_k_iteration(acc, ring, sh, wg, pos, 1);
    if (i > 0) {  // the group before this one is done: its stage may be refilled
      wgmma_wait<1>();
      if (releaser) release_stage(&sh.empty[prev]);
    }
    prev = pos.stage;
    pos.advance();
  }
  wgmma_wait<0>();
  fence_regs(acc);
  if (releaser) release_stage(&sh.empty[prev]);
}

// The first row and column of part `rb` of the tile at m0, n0: row block rb (rows 64 rb .. 64 rb +
// 63), or split along N (and wide tiles) the columns of warpgroup rb.
__device__ __forceinline__ int part_row(int m0, int rb) { return m0 + (Config::kWgColumns ? 0 : 64 * rb); }
__device__ __forceinline__ int part_col(int n0, int rb) { return n0 + (Config::kWgColumns ? Config::kWgN * rb : 0); }

// Where accumulator i of thread t (0..127) of warpgroup wg sits in the tile (the wgmma m64nNk16
// fp32 D layout: warp w of the warpgroup holds rows 16w..16w+15; per 8-column block j, registers
// 4j, 4j+1 at row lane/4, columns 8j + 2(lane%4) + {0, 1}; registers 4j+2, 4j+3 eight rows lower;
// a wide tile's second m64 block, accumulators kAcc on, 64 rows lower), from the first row and
// column of the warpgroup's part (wg 0: within a warpgroup's part).
__device__ __forceinline__ void coord_of(int i, int wg, int t, int& r, int& c) {
  const int lane = t & 31, warp = t >> 5;
  // (one block unless wide: spelled out so that ptxas sees no division there)
  const int blk = Config::kWide ? i / kAcc : 0, ib = Config::kWide ? i % kAcc : i;
  r = part_row(0, wg) + 64 * blk + warp * 16 + (lane >> 2) + 8 * ((ib >> 1) & 1);
  c = part_col(0, wg) + 8 * (ib >> 2) + 2 * (lane & 3) + (ib & 1);
}

// The same for this thread.
__device__ __forceinline__ void coord(int i, int wg, int& r, int& c) { coord_of(i, wg, threadIdx.x & 127, r, c); }

template <bool kReadC>
__device__ __forceinline__ void epilogue_loop(const float (&acc)[kCoopAcc], int wg, const Out* C, Out* D, int M, int N,
                                              long long ldc_m, long long ldc_n, long long ldd_m,
                                              long long ldd_n, int m0, int n0, float a, float b) {
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) {
    int r, c;
    coord(i, wg, r, c);
    const int gr = m0 + r, gc = n0 + c;
    if (gr < M && gc < N) {
      float v = a * acc[i];
      if (kReadC) v += b * to_acc(C[gr * ldc_m + gc * ldc_n]);
      D[gr * ldd_m + gc * ldd_n] = Store<Out>::from(v);
    }
  }
}

// Row-major D (and C) with even leading dimensions and aligned bases: accumulators i, i + 1 are
// columns gc, gc + 1 (gc even) of one row, stored (and read) as one pair.
template <bool kReadC>
__device__ __forceinline__ void epilogue_pairs(const float (&acc)[kCoopAcc], int wg, const Out* C, Out* D, int M, int N,
                                               long long ldc_m, long long ldd_m, int m0, int n0, float a, float b) {
#pragma unroll
  for (int i = 0; i < kCoopAcc; i += 2) {
    int r, c;
    coord(i, wg, r, c);
    const int gr = m0 + r, gc = n0 + c;
    if (gr < M) epilogue_pair<kReadC>(C, D, ldc_m, ldd_m, gr, gc, N, a * acc[i], a * acc[i + 1], b);
  }
}

// Where the STAGED epilogue keeps 16-byte piece q of staged row r: XOR-permuted by r & 7 (rows of a
// whole number of 128 bytes), else rotated by r.  Either way the 8 rows that one store instruction
// of the fragments touches land on distinct banks: with rows of 160, 192 or 224 bytes, row r's
// piece q starts 44 r, 52 r or 60 r words (mod 32) after row 0's, eight distinct multiples of 4.
__device__ __forceinline__ int piece_at(int q, int r) {
  constexpr int kPieces = Config::kOutPitch / 16;
  if constexpr (Config::kOutRotate)
    return (q + r) % kPieces;
  else
    return q ^ (r & 7);
}

// One element (index j of the 16 bytes v) written alone: the ragged right edge of a staged row.
__device__ __forceinline__ void store_piece_elem(Out* dst, const uint4& v, int j) {
  const unsigned w = (j * (int)sizeof(Out)) / 4 == 0 ? v.x : (j * (int)sizeof(Out)) / 4 == 1 ? v.y
                     : (j * (int)sizeof(Out)) / 4 == 2 ? v.z : v.w;
  if constexpr (sizeof(Out) == 2)
    *reinterpret_cast<unsigned short*>(dst) = (unsigned short)(w >> (16 * (j & 1)));
  else
    *reinterpret_cast<unsigned*>(dst) = w;
}

// A staged 16-byte piece v at dst, of whose elements the first `left` lie inside the output: one
// 16-byte store where all do, else element by element (a ragged edge).
__device__ __forceinline__ void store_piece(Out* dst, const uint4& v, int left) {
  constexpr int kPer16 = 16 / (int)sizeof(Out);
  if (left >= kPer16) {
    *reinterpret_cast<uint4*>(dst) = v;
    return;
  }
#pragma unroll
  for (int j = 0; j < kPer16; ++j)
    if (j < left) store_piece_elem(dst + j, v, j);
}

// STAGED: the 64 rows x kWgN columns of the output from row r0, column c0 (part_row, part_col)
// that consumer warpgroup wg holds, as alpha * acc, kOutCols columns (chunk CH, then the next by
// recursion: the accumulator indices stay compile-time) at a time, through `buf` (64 x kOutPitch
// bytes, the warpgroup's own, at `bufs`; OUT_BUFFERS 2: odd chunks through its twin in the second
// set): the pairs a thread holds go to shared memory with the 16-byte pieces of each row
// XOR-permuted by the row (r & 7: the 8 rows one store instruction touches land on distinct
// banks), then each thread stores whole 16-byte pieces, a warp two or more full rows.
// The warpgroup's own named barrier (kWgBar + wg) orders the writes and reads of `buf`, including
// against the previous chunk's, block's or tile's reads.  Needs beta == 0, D row-major, 16-byte
// aligned rows.  Cooperative: wg's part of the tile; pingpong: wg's tile has kMBlocks row blocks,
// one at a time.
// TMA (kTmaStore): buf holds kOutPitch / 128 boxes of 64 rows x 128 bytes, one after another, the
// 16-byte pieces of row r XOR-permuted by r & 7 (the TMA's 128-byte swizzle, the same banks as
// above); the warpgroup's first thread stores the boxes through `d_desc` (rows and columns past
// the output are not written) and, before buf is written again, waits until they have been read.
template <int CH = 0>
__device__ __forceinline__ void epilogue_staged(const float (&acc)[kAcc], int wg, Out* D, int M, int N,
                                                long long ldd_m, int r0, int c0, float a, unsigned char* bufs,
                                                const TmaDesc* d_desc) {
  constexpr int kPieces = Config::kOutPitch / 16, kPer16 = 16 / (int)sizeof(Out);
  constexpr int kFirst = CH * Config::kOutCols / 2, kLast = (CH + 1) * Config::kOutCols / 2;
  const int t = threadIdx.x & 127;
  const int bar = Config::kWgBar + wg;
  unsigned char* const buf = bufs + (Config::kOutBuffers > 1 && CH % 2 == 1 ? Config::kOutStageBytes : 0);  // odd: 2nd set
  // the bulk stores of the previous chunk or tile have read buf (two buffer sets: of the chunk
  // before, which used buf; the previous chunk's may still read the other set)
  if constexpr (Config::kTmaStore)
    if (t == 0) tma_store_wait_read<Config::kOutBuffers - 1>();
  named_sync<128>(bar);  // every thread is done reading buf (the previous chunk or tile)
  // where the 16-byte piece that holds the chunk's byte `byte` of row r lies in buf
  const auto piece_in_buf = [&](int r, int byte) -> unsigned char* {
    if constexpr (Config::kTmaStore)
      return buf + (byte >> 7) * Config::kOutBoxBytes + r * 128 + ((((byte & 127) >> 4) ^ (r & 7)) << 4);
    else
      return buf + r * Config::kOutPitch + (piece_at(byte >> 4, r) << 4);
  };
  if constexpr (sizeof(Out) == 2 && Config::kOutCols % 16 == 0) {
    // 16-bit output: each 16 x 16 block of the warp's rows through one stmatrix (accumulators
    // i .. i + 7: rows +0 / +8 of columns +0, then of columns +8), four 8 x 8 matrices whose row
    // addresses lanes 8 j .. 8 j + 7 give: a quarter of the shared stores of pairs.
    const int lane = t & 31, j = lane >> 3;
    const int r = (t >> 5) * 16 + (lane & 7) + 8 * (j & 1);  // the row within this warpgroup's 64
#pragma unroll
    for (int i = kFirst; i < kLast; i += 8) {
      const int byte = (2 * i + 8 * (j >> 1) - CH * Config::kOutCols) * (int)sizeof(Out);  // column 2i: coord_of
      stmatrix_x4(piece_in_buf(r, byte), pack_pair<Out>(a * acc[i], a * acc[i + 1]),
                  pack_pair<Out>(a * acc[i + 2], a * acc[i + 3]), pack_pair<Out>(a * acc[i + 4], a * acc[i + 5]),
                  pack_pair<Out>(a * acc[i + 6], a * acc[i + 7]));
    }
  } else {
#pragma unroll
    for (int i = kFirst; i < kLast; i += 2) {
      int r, c;
      coord_of(i, 0, t, r, c);  // r: the row within this warpgroup's 64
      const int byte = (c - CH * Config::kOutCols) * (int)sizeof(Out);
      store_pair(reinterpret_cast<Out*>(piece_in_buf(r, byte) + (byte & 15)), a * acc[i], a * acc[i + 1]);
    }
  }
  if constexpr (Config::kTmaStore) {
    fence_proxy_async_shared();  // the writes above, before the TMA unit reads them
    named_sync<128>(bar);        // the chunk is in buf
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < Config::kOutPitch / 128; ++h)
        tma_store_2d(d_desc, buf + h * Config::kOutBoxBytes, c0 + CH * Config::kOutCols + h * Config::kOutBoxCols,
                     r0);
      tma_store_commit();
    }
  } else {
    named_sync<128>(bar);  // the chunk is in buf
#pragma unroll
    for (int s = 0; s < 64 * kPieces / 128; ++s) {
      const int piece = t + 128 * s;
      const int r = piece / kPieces, q = piece % kPieces;
      const int gr = r0 + r, gc = c0 + CH * Config::kOutCols + q * kPer16;
      if (gr >= M || gc >= N) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(buf + r * Config::kOutPitch + (piece_at(q, r) << 4));
      store_piece(D + gr * ldd_m + gc, v, N - gc);
    }
  }
  if constexpr (CH + 1 < Config::kOutChunks) epilogue_staged<CH + 1>(acc, wg, D, M, N, ldd_m, r0, c0, a, bufs, d_desc);
}

// COLUMNS: as epilogue_staged, for a column-major D (ldd_m == 1; the launcher's transposed
// product).  Each of the chunk's kOutCols columns goes to `buf` as one kColBytes column of the
// warpgroup's 64 rows, its 16-byte pieces XOR-permuted by the column (c & 7): the four columns one
// store instruction of the fragments touches (eight rows each, one piece) land on distinct banks.
// Then each thread stores whole 16-byte pieces, eight threads (16-bit output) one 128-byte piece
// of an output column.  Needs beta == 0, ldd_m == 1, 16-byte aligned columns.
template <int CH = 0>
__device__ __forceinline__ void epilogue_columns(const float (&acc)[kAcc], int wg, Out* D, int M, int N,
                                                 long long ldd_n, int r0, int c0, float a, unsigned char* buf) {
  constexpr int kPieces = Config::kColBytes / 16, kPer16 = 16 / (int)sizeof(Out);
  constexpr int kFirst = CH * Config::kOutCols / 2, kLast = (CH + 1) * Config::kOutCols / 2;
  const int t = threadIdx.x & 127;
  const int bar = Config::kWgBar + wg;
  named_sync<128>(bar);  // every thread is done reading buf (the previous chunk or tile)
  if constexpr (sizeof(Out) == 2 && Config::kOutCols % 16 == 0) {
    // 16-bit output: each 16 x 16 block of the warp's rows through one transposing stmatrix
    // (accumulators i .. i + 7, as epilogue_staged): lane 8 j + l gives the address of column l of
    // matrix j, whose 16 bytes are its eight rows, one piece of the staged column; an eighth of
    // the element-wise shared stores.
    const int lane = t & 31, j = lane >> 3;
    const int piece = (t >> 5) * 2 + (j & 1);  // rows 16 warp + 8 (j & 1) .. + 7 of the warpgroup's 64
#pragma unroll
    for (int i = kFirst; i < kLast; i += 8) {
      const int c = 2 * i + 8 * (j >> 1) + (lane & 7) - CH * Config::kOutCols;  // column 2i: coord_of
      stmatrix_x4_trans(buf + c * Config::kColBytes + ((piece ^ (c & 7)) << 4),
                        pack_pair<Out>(a * acc[i], a * acc[i + 1]), pack_pair<Out>(a * acc[i + 2], a * acc[i + 3]),
                        pack_pair<Out>(a * acc[i + 4], a * acc[i + 5]), pack_pair<Out>(a * acc[i + 6], a * acc[i + 7]));
    }
  } else {
#pragma unroll
    for (int i = kFirst; i < kLast; ++i) {
      int r, c;
      coord_of(i, 0, t, r, c);  // r: the row within this warpgroup's 64
      c -= CH * Config::kOutCols;
      const int byte = r * (int)sizeof(Out);
      *reinterpret_cast<Out*>(buf + c * Config::kColBytes + ((((byte >> 4) ^ (c & 7))) << 4) + (byte & 15)) =
          Store<Out>::from(a * acc[i]);
    }
  }
  named_sync<128>(bar);  // the chunk is in buf
#pragma unroll
  for (int s = 0; s < Config::kOutCols * kPieces / 128; ++s) {
    const int piece = t + 128 * s;
    const int c = piece / kPieces, q = piece % kPieces;
    const int gr = r0 + q * kPer16, gc = c0 + CH * Config::kOutCols + c;
    if (gr >= M || gc >= N) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(buf + c * Config::kColBytes + ((q ^ (c & 7)) << 4));
    store_piece(D + gc * ldd_n + gr, v, M - gr);
  }
  if constexpr (CH + 1 < Config::kOutChunks) epilogue_columns<CH + 1>(acc, wg, D, M, N, ldd_n, r0, c0, a, buf);
}

// TMA: the warpgroup's bulk stores are complete before its thread leaves (and the CTA's shared
// memory with it).
__device__ __forceinline__ void drain_stores() {
  if constexpr (Config::kTmaStore)
    if ((threadIdx.x & 127) == 0) tma_store_wait_all();
}

__device__ __forceinline__ bool staged_ok(const Out* p, long long ld_m, long long ld_n) {
  return ld_n == 1 && (ld_m * (long long)sizeof(Out)) % 16 == 0 && (reinterpret_cast<unsigned long long>(p) % 16) == 0;
}

__device__ __forceinline__ bool columns_ok(const Out* p, long long ld_m, long long ld_n) { return staged_ok(p, ld_n, ld_m); }

// alpha and beta as the epilogues use them, converted once per launch: float multipliers, and
// whether C is read at all (beta != 0 as a double: a beta too small for a float still reads C).
// Compared and converted in every epilogue, the doubles took the FP64 pipe, which the wgmmas
// share, at the start of each tile's epilogue (Nsight Compute: DSETP 5 % of the stall samples
// on 8192x8192x256, stall_math; RESULTS.md, sixty-seventh session).
struct Scale {
  float a, b;
  bool read_c;
};

// D = alpha * acc + beta * C on the in-bounds part rb of the tile at m0, n0 (row block rb: rows
// 64 rb .. 64 rb + 63; split along N and wide tiles: warpgroup rb's columns); C is not read when
// beta == 0.  `out_stage`: the STAGED (or COLUMNS) epilogue's buffers (one per consumer
// warpgroup, a wide tile's m64 blocks through it one after the other), unused otherwise; wg: the
// warpgroup that holds acc (cooperative: rb itself).
__device__ __forceinline__ void epilogue(const float (&acc)[kCoopAcc], int rb, const Out* C, Out* D, int M, int N,
                                         long long ldc_m, long long ldc_n, long long ldd_m, long long ldd_n,
                                         int m0, int n0, const Scale& sc,
                                         unsigned char* out_stage = nullptr, int wg = -1,
                                         const TmaDesc* d_desc = nullptr) {
  if constexpr (Config::kStagedEpilogue) {
    if (!sc.read_c && staged_ok(D, ldd_m, ldd_n)) {  // TMA: the launcher encoded d_desc for D then
      if (wg < 0) wg = rb;
#pragma unroll
      for (int j = 0; j < Config::kCoopBlocks; ++j)
        epilogue_staged(acc_block(acc, j), wg, D, M, N, ldd_m, part_row(m0, rb) + 64 * j, part_col(n0, rb),
                        sc.a, out_stage + wg * 64 * Config::kOutPitch, d_desc);
      return;
    }
  }
  if constexpr (Config::kColumnsEpilogue) {
    if (!sc.read_c && columns_ok(D, ldd_m, ldd_n)) {
      if (wg < 0) wg = rb;
#pragma unroll
      for (int j = 0; j < Config::kCoopBlocks; ++j)
        epilogue_columns(acc_block(acc, j), wg, D, M, N, ldd_n, part_row(m0, rb) + 64 * j, part_col(n0, rb),
                         sc.a, out_stage + wg * 64 * Config::kOutPitch);
      return;
    }
  }
  if constexpr (Config::kPlainOut) {
    __trap();  // the launcher promised the staged (or columns) path above
    return;
  }
  if constexpr (Config::kPairEpilogue) {
    if (pairs_ok(D, ldd_m, ldd_n) && (!sc.read_c || pairs_ok(C, ldc_m, ldc_n))) {
      if (!sc.read_c)
        epilogue_pairs<false>(acc, rb, C, D, M, N, ldc_m, ldd_m, m0, n0, sc.a, 0.f);
      else
        epilogue_pairs<true>(acc, rb, C, D, M, N, ldc_m, ldd_m, m0, n0, sc.a, sc.b);
      return;
    }
  }
  if (!sc.read_c)
    epilogue_loop<false>(acc, rb, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, m0, n0, sc.a, 0.f);
  else
    epilogue_loop<true>(acc, rb, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, m0, n0, sc.a, sc.b);
}

// The stream-K flags of a launch: a slot's partial is complete when its flag holds this launch's
// epoch.  The launcher passes a new epoch for every launch on the same flags, so flags left by
// earlier launches (smaller epochs) never read as complete and need no zeroing in between.
struct SkFlags {
  int* p;
  int epoch;
};

// The partial in slot `slot_id` is complete: publish it (fence, every consumer thread done, flag).
__device__ __forceinline__ void release_partial(const SkFlags& flags, int slot_id, long long* t_stored) {
  __threadfence();
  consumer_sync<Config::kConsumerThreads>();
  if (threadIdx.x == 128) flag_release(flags.p + slot_id, flags.epoch);
  if (t_stored) *t_stored = Timeline::now();  // timeline: the partial is stored and released
}

// Stream-K fix-up, as in gemm_persistent.cu but among the consumer threads only (the producer
// never waits for it).  Slot `cta` holds [acc index][consumer thread]; flags[cta] says it is full.
__device__ __forceinline__ void store_partial(const float (&acc)[kCoopAcc], float* ws, const SkFlags& flags,
                                              int slot_id = blockIdx.x, long long* t_stored = nullptr) {
  constexpr int T = Config::kConsumerThreads;
  const int t = threadIdx.x - 128;
  float* slot = ws + (long long)slot_id * kCoopAcc * T;
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) slot[i * T + t] = acc[i];
  release_partial(flags, slot_id, t_stored);
}

// SK_REDUCE SPREAD: the partial as pairs of accumulators, pair-major and consumer thread minor:
// slot pair p * T + t holds thread t's accumulators 2p, 2p + 1 (two adjacent columns), so that a
// warp's 8-byte stores fill two whole 128-byte lines, and a 16-byte chunk of the slot (threads t,
// t + 1, t even) is four adjacent columns of one row, which spread_reduce stores as they come
// (partial_coord).  Stored as the tile itself (row-major), each warp store touched eight lines:
// against that, level or up to 1.8 µs faster on nine few-tile products of 35-60 µs (RESULTS.md,
// forty-ninth session); storing a 128 x 128 partial still takes 2-3 µs there.
__device__ __forceinline__ void store_partial_tile(const float (&acc)[kCoopAcc], float* ws, const SkFlags& flags,
                                                   int slot_id, long long* t_stored) {
  constexpr int T = Config::kConsumerThreads;
  const int t = threadIdx.x - 128;
  float2* slot = reinterpret_cast<float2*>(ws + (long long)slot_id * kCoopAcc * T);
#pragma unroll
  for (int i = 0; i < kCoopAcc; i += 2) slot[(i / 2) * T + t] = make_float2(acc[i], acc[i + 1]);
  release_partial(flags, slot_id, t_stored);
}

// The tile row and column of a spread partial's 16-byte chunk f (store_partial_tile's layout).
__device__ __forceinline__ void partial_coord(int f, int& r, int& c) {
  constexpr int T = Config::kConsumerThreads;
  const int q = 2 * f, t = q % T;
  coord_of(2 * (q / T), t >> 7, t & 127, r, c);
}

__device__ __forceinline__ void add_partial(float (&acc)[kCoopAcc], const float* ws, const SkFlags& flags, int cta) {
  constexpr int T = Config::kConsumerThreads;
  const int t = threadIdx.x - 128;
  if (t == 0)
    while (flag_acquire(flags.p + cta) != flags.epoch) {
    }
  consumer_sync<T>();
  const float* slot = ws + (long long)cta * kCoopAcc * T;
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) acc[i] += __ldcg(slot + i * T + t);
}

// Where a contributor's partial goes for the owner: its CTA's slot (in a cluster, its rank's).
template <class S>
__device__ __forceinline__ int owner_slot(const S& sched) {
  return sk_slot_base(sched.ctas) + sched.me;
}

// The owner adds the partials of the lower CTAs that share its tile, nearest first (fixed order:
// bitwise reproducible), exactly as gemm_persistent.cu's fix_up.
template <class S>
__device__ __forceinline__ void fix_up(const S& sched, const WorkUnit& w, float (&acc)[kCoopAcc], const float* ws,
                                       const SkFlags& flags) {
  const long long start = sched.tile_start(w);
  const int base = sk_slot_base(sched.ctas);
  for (int c = sched.me - 1; c >= 0; --c) {
    const long long b = sched.sk_begin(c);
    if (b == sched.sk_begin(c + 1)) continue;
    add_partial(acc, ws, flags, base + c);
    if (b <= start) break;
  }
}

// SK_REDUCE SPREAD: every split unit's partial goes to a workspace slot (store_partial_tile); once
// a CTA has stored the partials of its whole stream-K range, it reduces each of its split tiles:
// it waits for every contributor of the tile, adds its share of the tile's elements over all their
// partials (in an order fixed by the tile's contributor count: the same bits on every run) and
// stores that share, four adjacent columns at a time.  Storing the whole range before any wait
// matters: a CTA's second unit is the
// lower tile's tail, which the tile's other contributors wait for; had the CTA waited on its first
// tile before computing the second, each CTA would wait for the next one's second unit, and the
// waits would chain through the grid (one unit after another: 14 TFLOP/s on 896x2432x8192).
// As it is, every CTA stores all its partials before it waits for any (all CTAs are resident),
// so every wait ends.  A range whose last unit is a whole tile reduces its pending split tile
// when the CTA runs out of units.
// Slots: a CTA's stream-K range holds at most two split units, its first (the upper tile) and,
// when the range runs on past that tile's start, its last (the lower tile): CTA c writes them to
// slots 2c and 2c + 1 (a workspace of 2 x grid tiles), so the second never overwrites a partial
// others may still be adding.  A tile's contributors are CTAs lo..last; all but the last hold it
// as their upper unit.  With fewer stream-K iterations than CTAs each non-empty range is one
// iteration, and its slot is that iteration's global index.  In a cluster, c counts clusters and
// each rank's slots follow those of the ranks below it (2 x clusters each: sk_slot_base).
// mgemm.schedule.spread_slots mirrors the slots and spread_reductions what each CTA reduces, in
// order (tests/test_schedule.py checks both: no slot shared, every share of every split tile
// reduced once).
struct SpreadSlots {
  int lo, count, mine, rank, last_slot, base;
  bool one_each;
  bool ends_range;  // w is the CTA's last stream-K unit (the range is walked from its end)
  template <class S>
  __device__ __forceinline__ SpreadSlots(const S& sched, const WorkUnit& w) {
    const long long ts = sched.tile_start(w), te = ts + sched.g.k_iters;
    base = sk_slot_base(2 * sched.ctas);
    one_each = sched.sk_iters < sched.ctas;  // some CTAs have no stream-K range
    ends_range = ts + w.k_begin == sched.sk_begin(sched.me);
    if (one_each) {
      lo = (int)ts;
      count = sched.g.k_iters;
      mine = base + (int)(ts + w.k_begin);
      rank = mine - base - lo;
      last_slot = base + lo + count - 1;
    } else {
      lo = sched.cta_of(ts);
      const int last = sched.cta_of(te - 1);
      count = last - lo + 1;
      const int c = sched.me;
      const bool lower = ts + w.k_begin == sched.sk_begin(c) && sched.sk_begin(c + 1) > te;
      mine = base + 2 * c + (lower ? 1 : 0);
      rank = c - lo;
      last_slot = base + 2 * last + (sched.sk_begin(last + 1) > te ? 1 : 0);
    }
  }
  // the slot of the tile's r-th contributor
  __device__ __forceinline__ int slot_of(int r) const {
    return one_each ? base + lo + r : (r + 1 < count ? base + 2 * (lo + r) : last_slot);
  }
};

// D[gr, gc .. gc + 3] = a * x (+ b * C where read_c), the columns inside N: two pair stores where
// D is row-major, all four columns are inside N and the first pair is aligned; else element by
// element (a loop, not unrolled: see spread_reduce).
__device__ __forceinline__ void store_four(const float4& x, int gr, int gc, const Out* C, Out* D, int N,
                                           long long ldc_m, long long ldc_n, long long ldd_m, long long ldd_n,
                                           float a, float b, bool read_c) {
  Out* d = D + gr * ldd_m + gc * ldd_n;
  if (!read_c && ldd_n == 1 && gc + 4 <= N && reinterpret_cast<unsigned long long>(d) % (2 * sizeof(Out)) == 0) {
    store_pair(d, a * x.x, a * x.y);
    store_pair(d + 2, a * x.z, a * x.w);
    return;
  }
#pragma unroll 1
  for (int q = 0; q < 4 && gc + q < N; ++q) {
    float o = a * (q == 0 ? x.x : q == 1 ? x.y : q == 2 ? x.z : x.w);
    if (read_c) o += b * to_acc(C[gr * ldc_m + (gc + q) * ldc_n]);
    D[gr * ldd_m + (gc + q) * ldd_n] = Store<Out>::from(o);
  }
}

template <class S>
__device__ __forceinline__ void spread_reduce(const S& sched, const WorkUnit& w, const float* ws, const SkFlags& flags,
                                              const Out* C, Out* D, int M, int N, long long ldc_m,
                                              long long ldc_n, long long ldd_m, long long ldd_n, const Scale& sc,
                                              long long* t_ready = nullptr) {
  constexpr int T = Config::kConsumerThreads;
  constexpr int kElems = kCoopAcc * T;
  const int t = threadIdx.x - 128;
  const SpreadSlots s(sched, w);
  for (int r = t; r < s.count; r += T)  // one flag per thread: the waits overlap
    while (flag_acquire(flags.p + s.slot_of(r)) != flags.epoch) {
    }
  consumer_sync<T>();
  if (t_ready) *t_ready = Timeline::now();  // timeline: every contributor's partial is visible
  // The share: the 16-byte chunks [c0, c1) of the tile's kElems partial elements.  P lanes (a power
  // of two near count / 4, at most 32: the lanes of a warp) add each chunk, each lane every P-th
  // contributor in contributor order; a butterfly of shuffles adds the P sums in a fixed order, so
  // the bits are the same on every run.  A lane keeps kSlots contributors x kBatch chunks of loads
  // in flight before it adds any: a tile split 132 ways is two rounds of L2 latency, where one
  // chunk per thread and 8 contributors at a time waited out 17 (128x128x131072: 51 -> 40 us,
  // RESULTS.md fourteenth session).
  constexpr int kChunks = kElems / 4, kBatch = 4, kSlots = 4, kWarps = T / 32;
  const int c0 = (int)((long long)kChunks * s.rank / s.count);
  const int c1 = (int)((long long)kChunks * (s.rank + 1) / s.count);
  int P = 1;
  while (P < 32 && 8 * P <= s.count) P *= 2;
  const int G = 32 / P, lane = t & 31, p = lane / G;
  const int rounds = ((s.count + P - 1) / P + kSlots - 1) / kSlots;
  const int m0 = w.row * Config::kTileM, n0 = w.col * Config::kTileN;
  const float a = sc.a, b = sc.b;
  for (int base = c0; base < c1; base += kWarps * G * kBatch) {  // the same trip count in every lane
    // this lane's chunks: mine + j * G, so the G lanes of a contributor read G neighbouring chunks
    const int mine = base + (t >> 5) * G * kBatch + lane % G;
    float4 v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int rd = 0; rd < rounds; ++rd) {
      float4 x[kSlots][kBatch];
      bool live[kSlots];  // contributor r of this lane's round exists
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        const int r = p + P * (rd * kSlots + q);
        live[q] = r < s.count;
        const float4* src = reinterpret_cast<const float4*>(ws + (long long)s.slot_of(live[q] ? r : 0) * kElems);
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          x[q][j] = live[q] && mine + j * G < c1 ? __ldcg(src + mine + j * G) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int q = 0; q < kSlots; ++q)
        if (live[q])
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            v[j].x += x[q][j].x;
            v[j].y += x[q][j].y;
            v[j].z += x[q][j].z;
            v[j].w += x[q][j].w;
          }
    }
    for (int off = 16; off >= G; off >>= 1)
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        v[j].x += __shfl_xor_sync(0xffffffffu, v[j].x, off);
        v[j].y += __shfl_xor_sync(0xffffffffu, v[j].y, off);
        v[j].z += __shfl_xor_sync(0xffffffffu, v[j].z, off);
        v[j].w += __shfl_xor_sync(0xffffffffu, v[j].w, off);
      }
    if (p != 0) continue;
    // Chunk f: four columns of one tile row (partial_coord).  Not unrolled, and every
    // store through one store_four: this code runs once per launch on cold instruction caches,
    // where each new line of code costs a fetch (RESULTS.md, seventeenth session).
#pragma unroll 1
    for (int j = 0; j < kBatch; ++j) {
      const int f = mine + j * G;
      if (f >= c1) break;
      float4 x = v[0];
#pragma unroll
      for (int q = 1; q < kBatch; ++q)
        if (j == q) x = v[q];
      int r, c;
      partial_coord(f, r, c);
      const int gr = m0 + r, gc = n0 + c;
      if (gr < M) store_four(x, gr, gc, C, D, N, ldc_m, ldc_n, ldd_m, ldd_n, a, b, sc.read_c);
    }
  }
}

__device__ __forceinline__ void consume(unsigned char* ring, Shared& sh, const TileGrid& g, const SchedArgs& args,
                                        const Out* C, Out* D, int M, int N, long long ldc_m, long long ldc_n,
                                        long long ldd_m, long long ldd_n, const Scale& sc,
                                        const SkFlags& flags, float* workspace, const TmaDesc* d_desc,
                                        int* record, long long t_start) {
  const int wg = threadIdx.x / 128 - 1;
  const Scheduler sched(g, args);  // for stream-K's bookkeeping only; units come from the slots
  unsigned char* out_stage = ring + Config::kOutStageOffset;
  RingPos pos;
  WorkUnit pending;  // SK_REDUCE SPREAD: a split unit whose tile is reduced once the range is stored
  bool has_pending = false;
  Timeline tl{record};
  long long* pending_entry = nullptr;  // timeline: the pending unit's entry
  const long long t_wait = Config::kTimeline ? Timeline::now() : 0;  // timeline: set up, waiting for unit 0
  for (int u = 0;; ++u) {
    if constexpr (Config::kTimeline)
      if (tl.on() && tl.cur) tl.cur[7] = Timeline::now();  // the previous unit is done
    const WorkUnit w = take_unit(sh, u);
    const bool end = w.tile < 0;
    long long t_units = 0;  // timeline: when the units ran out
    bool reduce_w = false;  // SK_REDUCE SPREAD: w is a split unit that ends the CTA's stream-K range
    if (end) {
      if constexpr (Config::kTimeline) t_units = Timeline::now();
    } else {
      if constexpr (Config::kTimeline)
        if (tl.on()) tl.open(wg, w.tile, w.k_begin, w.k_end, Timeline::now());
      float acc[kCoopAcc];
      mainloop(acc, ring, sh, w.k_end - w.k_begin, wg, pos);
      if constexpr (Config::kTimeline)
        if (tl.on()) tl.cur[6] = Timeline::now();
      if constexpr (Scheduler::kSplitsK) {
        if constexpr (Config::kSpreadFixUp) {
          if (w.k_begin > 0 || w.k_end < g.k_iters) {  // a split tile: every contributor adds a share
            const SpreadSlots slots(sched, w);
            store_partial_tile(acc, workspace, flags, slots.mine, tl.stamp(tl.cur, Timeline::kStored));
            if (!slots.ends_range) {  // reduce once the whole range is stored
              pending = w;
              pending_entry = tl.cur;
              has_pending = true;
              continue;
            }
            reduce_w = true;
          }
        } else {
          if (w.k_end < g.k_iters) {  // a contributor: hand the partial to the tile's owner
            store_partial(acc, workspace, flags, owner_slot(sched), tl.stamp(tl.cur, Timeline::kStored));
            continue;
          }
          if (w.k_begin > 0) fix_up(sched, w, acc, workspace, flags);
        }
      }
      if constexpr (Config::kSplitOnly) {
        if (!reduce_w) __trap();  // a whole tile: the launcher promised none
      } else if (!reduce_w) {
        epilogue(acc, wg, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, w.row * Config::kTileM,
                 w.col * Config::kTileN, sc, out_stage, -1, d_desc);
        continue;
      }
    }
    // The units ran out, or w ended the stream-K range: reduce the pending split tile (the range's
    // first unit), then w's.  One call site, so that the fix-up's code is there once.
    if constexpr (Scheduler::kSplitsK && Config::kSpreadFixUp) {
      const int n_red = (has_pending ? 1 : 0) + (reduce_w ? 1 : 0);
#pragma unroll 1
      for (int q = 0; q < n_red; ++q) {
        const bool first_pending = q == 0 && has_pending;
        const WorkUnit r = first_pending ? pending : w;  // (a copy: no address taken)
        spread_reduce(sched, r, workspace, flags, C, D, M, N, ldc_m, ldc_n, ldd_m,
                      ldd_n, sc, tl.stamp(first_pending ? pending_entry : tl.cur, Timeline::kReady));
      }
      has_pending = false;
    }
    if (!end) continue;
    drain_stores();
    if constexpr (Config::kTimeline)
      if (tl.on()) tl.leave(wg, t_start, t_units, t_wait, sh.t_posted);
    return;
  }
}


// --- overlapped epilogues (MGEMM_OVERLAP 1) -------------------------------------------------------
//
// As mainloop, with `under()` run once the first k-iteration's wgmmas are issued (at once when
// there is no k-iteration), so that it runs while the tensor cores work on them.  One call site of
// `under`, so that its code is there once.
template <class Under>
__device__ __forceinline__ void mainloop_under(float (&acc)[kCoopAcc], unsigned char* ring, Shared& sh, int nk,
                                               int wg, RingPos& pos, Under&& under) {
#pragma unroll
  for (int i = 0; i < kCoopAcc; ++i) acc[i] = 0.f;
  const bool releaser = (threadIdx.x & 31) == 0;
  if (nk > 0) issue_k_iteration(acc, ring, sh, wg, pos, 1);
  under();
  if (nk <= 0) {
    wgmma_wait<0>();  // (none in flight; said, so that ptxas sees every path to acc's readers wait)
    return;
  }
  int prev = pos.stage;
  pos.advance();
  for (int i = 1; i < nk; ++i) {
    issue_k_iteration(acc, ring, sh, wg, pos, 1);
    wgmma_wait<1>();  // the group before this one is done: its stage may be refilled
    release_stage_if(releaser, &sh.empty[prev]);
    prev = pos.stage;
    pos.advance();
  }
  wgmma_wait<0>();
  fence_regs(acc);
  release_stage_if(releaser, &sh.empty[prev]);
}

// Cooperative consumers that hold each tile's result (times alpha) in a second register set and
// store it under the next unit's first wgmmas (after the end marker, under none).
__device__ __forceinline__ void consume_overlap(unsigned char* ring, Shared& sh, const Out* C, Out* D, int M, int N,
                                                long long ldc_m, long long ldc_n, long long ldd_m, long long ldd_n,
                                                const Scale& sc, const TmaDesc* d_desc) {
  const int wg = threadIdx.x / 128 - 1;
  const float a = sc.a;
  const Scale applied{1.f, sc.b, sc.read_c};  // the held result has alpha applied
  RingPos pos;
  float acc[kCoopAcc], held[kCoopAcc];
  int held_m0 = -1, held_n0 = 0;  // the held tile (none yet)
  for (int u = 0;; ++u) {
    const WorkUnit w = take_unit(sh, u);
    const bool end = w.tile < 0;
    mainloop_under(acc, ring, sh, end ? 0 : w.k_end - w.k_begin, wg, pos, [&] {
      if (held_m0 >= 0)
        epilogue(held, wg, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, held_m0, held_n0, applied,
                 ring + Config::kOutStageOffset, -1, d_desc);
    });
    if (end) break;
    // held = alpha acc now, while no wgmma is in flight: the epilogue then reads registers that
    // no wgmma defined, so ptxas adds no wait for the next unit's wgmmas before it (C7517)
#pragma unroll
    for (int i = 0; i < kCoopAcc; ++i) held[i] = a * acc[i];
    fence_regs(held);
    held_m0 = w.row * Config::kTileM;
    held_n0 = w.col * Config::kTileN;
  }
  drain_stores();
}

// --- pingpong consumers (MGEMM_PINGPONG 1) -------------------------------------------------------
//
// Every consumer thread still reads every unit slot (so the slots and their 256-arrival "empty"
// barriers are as above), but warpgroup w computes only units u with u % 2 == w, each a whole
// kTileM x kTileN tile (kMBlocks m64 wgmmas per k16 step), and skips the other's k-iterations in
// its ring position: the producer fills the ring in unit order, so unit u's stages are the next
// (k_end - k_begin) after unit u - 1's.  A stage is read by one warpgroup: 4 "empty" arrivals.
//
// The math turn: before its mainloop, the warpgroup of unit u > 0 waits on its turn barrier
// (kTurnBar + w, 256 threads), which the other warpgroup arrives on once it has issued the last
// wgmmas of unit u - 1; so the mainloops follow each other and each epilogue (and stream-K
// fix-up) runs under the other warpgroup's mainloop.  Arrivals and waits alternate strictly on
// each barrier (an arrival for unit u + 2 needs the turn that the wait for unit u + 1 passes on);
// the warpgroup that meets the end marker at u takes the turn of unit u - 1 too, so no arrival is
// left pending at exit.

template <int MB>
__device__ __forceinline__ void mainloop_pingpong(float (&acc)[MB][kAcc], unsigned char* ring, Shared& sh, int nk,
                                                  RingPos& pos, int other_turn) {
#pragma unroll
  for (int j = 0; j < MB; ++j)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[j][i] = 0.f;
  if (nk <= 0) {
    named_arrive<Config::kConsumerThreads>(other_turn);
    return;
  }
  const bool releaser = (threadIdx.x & 31) == 0;  // one arrival per warp of this warpgroup
  int prev = 0;
  for (int i = 0; i < nk; ++i) {
    mbar_wait(&sh.full[pos.stage], pos.phase);
    const unsigned a = smem_addr(ring + pos.stage * Config::kStageBytes);
    const unsigned b = smem_addr(ring + pos.stage * Config::kStageBytes + Config::kABytes);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Config::kTileK / Config::kInstK; ++kk) {
      const unsigned long long db = operand_desc<Config::kBKMajor>(b, kk);
#pragma unroll
      for (int j = 0; j < MB; ++j) {  // rows 64 j .. 64 j + 63: 8 KB in, K-major rows or MN-major box j
        const unsigned long long da = operand_desc<Config::kAKMajor>(a + j * 64 * 128, kk);
        wgmma_ss<Config::kAKMajor ? 0 : 1, Config::kBKMajor ? 0 : 1>(acc[j], da, db, 1, Tag<In>());
      }
    }
    wgmma_commit();
    if (i > 0) {
      wgmma_wait<1>();
      if (releaser) mbar_arrive(&sh.empty[prev]);
    }
    prev = pos.stage;
    pos.advance();
  }
  named_arrive<Config::kConsumerThreads>(other_turn);  // every wgmma of this unit is issued
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < MB; ++j) fence_regs(acc[j]);
  if (releaser) mbar_arrive(&sh.empty[prev]);
}

// Stream-K partials of one warpgroup: slot `cta` holds [m block][acc index][thread of 128].
template <int MB>
__device__ __forceinline__ void store_partial_wg(const float (&acc)[MB][kAcc], float* ws, const SkFlags& flags, int wg,
                                                 long long* t_stored = nullptr) {
  constexpr int T = 128;
  const int t = threadIdx.x & 127;
  float* slot = ws + (long long)blockIdx.x * MB * kAcc * T;
#pragma unroll
  for (int j = 0; j < MB; ++j)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) slot[(j * kAcc + i) * T + t] = acc[j][i];
  __threadfence();
  named_sync<T>(Config::kWgBar + wg);
  if (t == 0) flag_release(flags.p + blockIdx.x, flags.epoch);
  if (t_stored) *t_stored = Timeline::now();  // timeline: the partial is stored and released
}

template <int MB>
__device__ __forceinline__ void add_partial_wg(float (&acc)[MB][kAcc], const float* ws, const SkFlags& flags, int cta,
                                               int wg) {
  constexpr int T = 128;
  const int t = threadIdx.x & 127;
  if (t == 0)
    while (flag_acquire(flags.p + cta) != flags.epoch) {
    }
  named_sync<T>(Config::kWgBar + wg);
  const float* slot = ws + (long long)cta * MB * kAcc * T;
#pragma unroll
  for (int j = 0; j < MB; ++j)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[j][i] += __ldcg(slot + (j * kAcc + i) * T + t);
}

template <class S, int MB>
__device__ __forceinline__ void fix_up_wg(const S& sched, const WorkUnit& w, float (&acc)[MB][kAcc], const float* ws,
                                          const SkFlags& flags, int wg) {
  const long long start = sched.tile_start(w);
  for (int c = (int)blockIdx.x - 1; c >= 0; --c) {
    const long long b = sched.sk_begin(c);
    if (b == sched.sk_begin(c + 1)) continue;
    add_partial_wg(acc, ws, flags, c, wg);
    if (b <= start) break;
  }
}

// (a template, so that only pingpong builds instantiate it: its m64 blocks are not a wide tile's)
template <int MB = Config::kMBlocks>
__device__ __forceinline__ void consume_pingpong(unsigned char* ring, Shared& sh, const TileGrid& g,
                                                 const SchedArgs& args, const Out* C, Out* D, int M, int N,
                                                 long long ldc_m, long long ldc_n, long long ldd_m, long long ldd_n,
                                                 const Scale& sc, const SkFlags& flags,
                                                 float* workspace, const TmaDesc* d_desc, int* record,
                                                 long long t_start) {
  const int wg = threadIdx.x / 128 - 1;
  const Scheduler sched(g, args);  // for stream-K's bookkeeping only; units come from the slots
  unsigned char* out_stage = ring + Config::kOutStageOffset;
  RingPos pos;
  // TIMELINE: as consume's, for the units this warpgroup runs (every other one); a unit is taken
  // when its turn comes (the wait for the other warpgroup's mainloop falls between units)
  Timeline tl{record};
  const long long t_wait = Config::kTimeline ? Timeline::now() : 0;
  for (int u = 0;; ++u) {
    const WorkUnit w = take_unit(sh, u);
    if (w.tile < 0) {
      const long long t_units = Config::kTimeline ? Timeline::now() : 0;
      if (u > 0 && (u & 1) == wg) named_sync<Config::kConsumerThreads>(Config::kTurnBar + wg);
      drain_stores();
      if constexpr (Config::kTimeline)
        if (tl.on()) tl.leave(wg, t_start, t_units, t_wait, sh.t_posted);
      return;
    }
    const int nk = w.k_end - w.k_begin;
    if ((u & 1) != wg) {
      pos.skip(nk);
      continue;
    }
    if (u > 0) named_sync<Config::kConsumerThreads>(Config::kTurnBar + wg);
    if constexpr (Config::kTimeline)
      if (tl.on()) tl.open(wg, w.tile, w.k_begin, w.k_end, Timeline::now());
    float acc[MB][kAcc];
    mainloop_pingpong(acc, ring, sh, nk, pos, Config::kTurnBar + (wg ^ 1));
    if constexpr (Config::kTimeline)
      if (tl.on()) tl.cur[6] = Timeline::now();
    if constexpr (Scheduler::kSplitsK) {
      if (w.k_end < g.k_iters) {  // a contributor: hand the partial to the tile's owner
        store_partial_wg(acc, workspace, flags, wg, tl.stamp(tl.cur, Timeline::kStored));
        if constexpr (Config::kTimeline)
          if (tl.on()) tl.cur[7] = Timeline::now();
        continue;
      }
      if (w.k_begin > 0) fix_up_wg(sched, w, acc, workspace, flags, wg);
    }
#pragma unroll
    for (int j = 0; j < MB; ++j)
      epilogue(acc[j], j, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, w.row * Config::kTileM, w.col * Config::kTileN,
               sc, out_stage, wg, d_desc);
    if constexpr (Config::kTimeline)
      if (tl.on()) tl.cur[7] = Timeline::now();  // done: output written or its stores issued
  }
}

}  // namespace hopper
}  // namespace mgemm

using namespace mgemm;
using namespace mgemm::hopper;

// tma_a.d[p]: part p of A as a (K, M) tensor, K contiguous, box (BK, 128); tma_b.d[p]: part p of B^T
// as (K, N), box (BK, BN); all CU_TENSOR_MAP_SWIZZLE_128B with zero fill.  MN-major (16-bit): A as
// (M, K), M contiguous, box (64, BK); B as (N, K), N contiguous, box (64, BK) (coordinates:
// contiguous first).  part_ends: the k-iterations at which the parts end (the last: all of them;
// one part: ceil(K / BK)).  sync[0]: the dynamic counter, zero at launch; sync[1 + cta]: stream-K
// flags, each below sk_epoch at launch (a partial is complete when its flag holds sk_epoch > 0).
// workspace: grid x 128 x TILE_N floats when stream-K splits tiles (SK_REDUCE SPREAD: 2 x grid of
// each; sync then holds 1 + 2 x grid ints).
#if MGEMM_CLUSTER_M * MGEMM_CLUSTER_N > 1  // the launcher's grid is a multiple of the cluster size
#define MGEMM_CLUSTER_DIMS __cluster_dims__(MGEMM_CLUSTER_M * MGEMM_CLUSTER_N, 1, 1)
#else
#define MGEMM_CLUSTER_DIMS
#endif
extern "C" __global__ void __launch_bounds__(Config::kThreads, 1) MGEMM_CLUSTER_DIMS mgemm_gemm_hopper(
    const __grid_constant__ TmaParts tma_a, const __grid_constant__ TmaParts tma_b, const Out* C, Out* D,
    int M, int N, long long ldc_m, long long ldc_n, long long ldd_m, long long ldd_n, double alpha,
    double beta, int* sync, float* workspace, int sk_tiles, int* record, const PartEnds part_ends,
    int sk_epoch
#if MGEMM_EPILOGUE == MGEMM_EPILOGUE_TMA
    , const __grid_constant__ TmaDesc tma_d  // D as an (N, M) tensor, box (128 bytes, 64), 128-byte swizzle
#endif
    ) {
  const long long t_start = Config::kTimeline ? Timeline::now() : 0;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  Shared& sh = *reinterpret_cast<Shared*>(ring + Config::kStages * Config::kStageBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Config::kStages; ++s) {
      mbar_init(&sh.full[s], 1);
      mbar_init(&sh.empty[s], Config::kEmptyArrivals);
    }
    for (int u = 0; u < Config::kUnits; ++u) {
      mbar_init(&sh.unit_full[u], 1);
      mbar_init(&sh.unit_empty[u], Config::kConsumerThreads);
    }
    mbar_init_fence();
  }
  // The last block-wide barrier: from here on the roles never meet in one.  Clusters: the
  // cluster's, so that peers arrive on and multicast to initialized barriers only.
  if constexpr (Config::kClusterSize > 1)
    cluster_sync_aligned();
  else
    __syncthreads();

  TileGrid grid;
  grid.rows = (M + Config::kTileM - 1) / Config::kTileM;
  grid.cols = (N + Config::kTileN - 1) / Config::kTileN;
  grid.tiles = grid.rows * grid.cols;
  grid.k_iters = part_ends.end[Config::kKParts - 1];  // every part's k-iterations (0 when K = 0)
  SchedArgs args;
  args.counter = sync;
  args.sk_tiles = sk_tiles;
  const SkFlags flags{sync + 1, sk_epoch};

  if (threadIdx.x < 128) {  // producer warpgroup
    setmaxnreg_dec<Config::kProducerRegs>();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int p = 0; p < Config::kKParts; ++p) {
        tma_prefetch(&tma_a.d[p]);
        tma_prefetch(&tma_b.d[p]);
      }
      produce(tma_a, tma_b, part_ends, ring, sh, grid, args, record);
    }
  } else {  // consumer warpgroups
    setmaxnreg_inc<Config::kConsumerRegs>();
#if MGEMM_EPILOGUE == MGEMM_EPILOGUE_TMA
    const TmaDesc* d_desc = &tma_d;
    if (threadIdx.x == 128) tma_prefetch(d_desc);
#else
    const TmaDesc* d_desc = nullptr;
#endif
    // (An empty asm that made these opaque to the compiler, so that it could not recompute them
    // from the doubles, broke the spread stream-K fix-up of 128 x 256 float16 tiles: wrong sums in
    // every run, one H100, sixty-eighth session.)
    const Scale sc{(float)alpha, (float)beta, beta != 0.0};
    if constexpr (Config::kOverlap)
      consume_overlap(ring, sh, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, sc, d_desc);
    else if constexpr (Config::kPingpong)
      consume_pingpong(ring, sh, grid, args, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, sc, flags, workspace, d_desc,
                       record, t_start);
    else
      consume(ring, sh, grid, args, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, sc, flags, workspace, d_desc, record,
              t_start);
  }
  // Clusters: every thread of every CTA, so that none leaves (its shared memory with it) while a
  // peer's consumers may still arrive on its "empty" barriers.  The peers' multicasts into this
  // CTA are all awaited by its own consumers, which walk the same units.
  if constexpr (Config::kClusterSize > 1) cluster_sync();
}
