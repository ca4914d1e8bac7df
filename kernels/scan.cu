// Replay scan kernels: one pass over a tensor that counts the values outside a closed interval
// [lo, hi] (NaN always outside, `skip` always inside), takes the min and max (NaN excluded) and
// collects offending flat positions. Compiled at run time by NVRTC (no headers, no cuda_fp16.h);
// the host side is src/replay/gpu.rs, whose semantics are those of the CPU backend
// (src/replay/cpu.rs): integers and bool compare as int64 (uint64 saturates), f16 / bf16 / f32
// as float, f64 as double.
//
// Output buffer (u64 words, reset by the host before each launch):
//   [0] offending count           (atomicAdd, one per block)
//   [1] min key, [2] max key      (order-preserving u64 encoding of the lane value, -0.0 as +0.0)
//   [3] first offending position  (atomicMin)
//   [4] first position holding a zero of either sign (float lanes; the host reads its sign)
//   [5] slot counter, [6 .. 6 + cap) offending positions in no particular order
// A thread stops collecting after its first failed slot, so at most cap + threads atomics hit
// the counter; the host knows the list is complete when count == min(slots, cap).

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef short i16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define OUT_COUNT 0
#define OUT_MIN 1
#define OUT_MAX 2
#define OUT_FIRST 3
#define OUT_ZERO 4
#define OUT_SLOTS 5
#define OUT_POS 6

#define NONE 0xffffffffffffffffull
#define SIGN64 0x8000000000000000ull
#define THREADS 256

// Order-preserving keys: a < b exactly when key(a) < key(b) (NaN never keyed).
__device__ __forceinline__ u64 lane_key(i64 v) { return ((u64)v) ^ SIGN64; }

__device__ __forceinline__ u64 lane_key(float v) {
    u32 b = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (b & 0x80000000u) ? (u64)(~b) : (u64)(b | 0x80000000u);
}

__device__ __forceinline__ u64 lane_key(double v) {
    u64 b = (u64)__double_as_longlong(v == 0.0 ? 0.0 : v);
    return (b & SIGN64) ? ~b : (b | SIGN64);
}

__device__ __forceinline__ bool lane_nan(i64) { return false; }
__device__ __forceinline__ bool lane_nan(float v) { return v != v; }
__device__ __forceinline__ bool lane_nan(double v) { return v != v; }

// The host passes bounds as raw 64-bit patterns of the lane type.
__device__ __forceinline__ void from_bits(u64 b, i64 &v) { v = (i64)b; }
__device__ __forceinline__ void from_bits(u64 b, float &v) { v = __uint_as_float((u32)b); }
__device__ __forceinline__ void from_bits(u64 b, double &v) { v = __longlong_as_double((i64)b); }

// Element readers: the stored type and how it widens into its lane.
struct ReadU8 {
    typedef u8 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(u8 x) { return (i64)x; }
};
struct ReadI8 {
    typedef i8 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(i8 x) { return (i64)x; }
};
struct ReadI16 {
    typedef i16 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(i16 x) { return (i64)x; }
};
struct ReadU16 {
    typedef u16 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(u16 x) { return (i64)x; }
};
struct ReadI32 {
    typedef i32 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(i32 x) { return (i64)x; }
};
struct ReadU32 {
    typedef u32 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(u32 x) { return (i64)x; }
};
struct ReadI64 {
    typedef i64 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    static __device__ __forceinline__ i64 read(i64 x) { return x; }
};
struct ReadU64 {
    typedef u64 Elem; typedef i64 Lane; enum { FLOAT = 0 };
    // Values above INT64_MAX saturate, as on the CPU.
    static __device__ __forceinline__ i64 read(u64 x) {
        return x > 0x7fffffffffffffffull ? (i64)0x7fffffffffffffffll : (i64)x;
    }
};
struct ReadF16 {
    typedef u16 Elem; typedef float Lane; enum { FLOAT = 1 };
    // Exact widening (subnormals, infinities and NaN included) by the hardware conversion.
    static __device__ __forceinline__ float read(u16 x) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
        return f;
    }
};
struct ReadBF16 {
    typedef u16 Elem; typedef float Lane; enum { FLOAT = 1 };
    static __device__ __forceinline__ float read(u16 x) { return __uint_as_float(((u32)x) << 16); }
};
struct ReadF32 {
    typedef float Elem; typedef float Lane; enum { FLOAT = 1 };
    static __device__ __forceinline__ float read(float x) { return x; }
};
struct ReadF64 {
    typedef double Elem; typedef double Lane; enum { FLOAT = 1 };
    static __device__ __forceinline__ double read(double x) { return x; }
};

// What one thread (then one warp, then one block) found.
struct Acc {
    u64 count, kmin, kmax, first, zero;
};

__device__ __forceinline__ void acc_merge(Acc &a, const Acc &b) {
    a.count += b.count;
    a.kmin = b.kmin < a.kmin ? b.kmin : a.kmin;
    a.kmax = b.kmax > a.kmax ? b.kmax : a.kmax;
    a.first = b.first < a.first ? b.first : a.first;
    a.zero = b.zero < a.zero ? b.zero : a.zero;
}

__device__ __forceinline__ Acc acc_shfl_down(const Acc &a, int delta) {
    Acc b;
    b.count = __shfl_down_sync(0xffffffffu, a.count, delta);
    b.kmin = __shfl_down_sync(0xffffffffu, a.kmin, delta);
    b.kmax = __shfl_down_sync(0xffffffffu, a.kmax, delta);
    b.first = __shfl_down_sync(0xffffffffu, a.first, delta);
    b.zero = __shfl_down_sync(0xffffffffu, a.zero, delta);
    return b;
}

// Scans elements [begin, end) of `data` (a 16-byte aligned buffer whose size is a multiple of
// 16 bytes); position i is reported as base + i. Each thread reads 16 bytes at a time.
template <typename R>
__device__ __forceinline__ void scan_impl(const uint4 *__restrict__ data, u64 begin, u64 end,
                                          u64 base, u64 lo_bits, u64 hi_bits, u64 skip_bits,
                                          int has_skip, int collect, u64 cap, u64 *out) {
    typedef typename R::Elem E;
    typedef typename R::Lane L;
    const u64 per = 16 / sizeof(E);
    L lo, hi, skip;
    from_bits(lo_bits, lo);
    from_bits(hi_bits, hi);
    from_bits(skip_bits, skip);

    Acc acc;
    acc.count = 0;
    acc.kmin = NONE;
    acc.kmax = 0;
    acc.first = NONE;
    acc.zero = NONE;
    bool room = collect != 0;

    const u64 vend = (end + per - 1) / per;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 v = begin / per + (u64)blockIdx.x * blockDim.x + threadIdx.x; v < vend; v += stride) {
        union {
            uint4 raw;
            E e[16 / sizeof(E)];
        } u;
        u.raw = data[v];
        const u64 i0 = v * per;
        const bool whole = i0 >= begin && i0 + per <= end;
#pragma unroll
        for (u64 j = 0; j < per; j++) {
            const u64 i = i0 + j;
            if (!whole && (i < begin || i >= end)) continue;
            const L x = R::read(u.e[j]);
            const bool bad = !(x >= lo && x <= hi) && !(has_skip && x == skip);
            if (!lane_nan(x)) {
                const u64 k = lane_key(x);
                acc.kmin = k < acc.kmin ? k : acc.kmin;
                acc.kmax = k > acc.kmax ? k : acc.kmax;
                if (R::FLOAT && x == (L)0 && acc.zero == NONE) acc.zero = base + i;
            }
            if (bad) {
                acc.count++;
                if (acc.first == NONE) acc.first = base + i;
                if (room) {
                    const u64 slot = atomicAdd(&out[OUT_SLOTS], 1ull);
                    if (slot < cap) {
                        out[OUT_POS + slot] = base + i;
                    } else {
                        room = false;
                    }
                }
            }
        }
    }

    // Warp, then block reduction; one atomic per block and field.
    for (int d = 16; d > 0; d >>= 1) acc_merge(acc, acc_shfl_down(acc, d));
    __shared__ Acc warps[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warps[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + 31) >> 5;
        if (lane < nwarps) {
            acc = warps[lane];
        } else {
            acc.count = 0;
            acc.kmin = NONE;
            acc.kmax = 0;
            acc.first = NONE;
            acc.zero = NONE;
        }
        for (int d = 16; d > 0; d >>= 1) acc_merge(acc, acc_shfl_down(acc, d));
        if (lane == 0) {
            if (acc.count) atomicAdd(&out[OUT_COUNT], acc.count);
            if (acc.kmin != NONE) atomicMin(&out[OUT_MIN], acc.kmin);
            if (acc.kmax != 0) atomicMax(&out[OUT_MAX], acc.kmax);
            if (acc.first != NONE) atomicMin(&out[OUT_FIRST], acc.first);
            if (acc.zero != NONE) atomicMin(&out[OUT_ZERO], acc.zero);
        }
    }
}

#define SCAN_KERNEL(NAME, READER)                                                               \
    extern "C" __global__ void __launch_bounds__(THREADS)                                      \
        NAME(const uint4 *__restrict__ data, u64 begin, u64 end, u64 base, u64 lo_bits,       \
             u64 hi_bits, u64 skip_bits, int has_skip, int collect, u64 cap, u64 *out) {      \
        scan_impl<READER>(data, begin, end, base, lo_bits, hi_bits, skip_bits, has_skip,       \
                          collect, cap, out);                                                  \
    }

SCAN_KERNEL(scan_u8, ReadU8)
SCAN_KERNEL(scan_i8, ReadI8)
SCAN_KERNEL(scan_i16, ReadI16)
SCAN_KERNEL(scan_u16, ReadU16)
SCAN_KERNEL(scan_i32, ReadI32)
SCAN_KERNEL(scan_u32, ReadU32)
SCAN_KERNEL(scan_i64, ReadI64)
SCAN_KERNEL(scan_u64, ReadU64)
SCAN_KERNEL(scan_f16, ReadF16)
SCAN_KERNEL(scan_bf16, ReadBF16)
SCAN_KERNEL(scan_f32, ReadF32)
SCAN_KERNEL(scan_f64, ReadF64)
