// Replay scan kernels: one pass over a tensor that counts the values outside a closed interval
// [lo, hi] (NaN always outside, `skip` always inside), takes the min and max (NaN excluded) and
// collects offending flat positions. Compiled at run time by NVRTC (no headers, no cuda_fp16.h);
// the host side is src/replay/gpu/, whose semantics are those of the CPU backend
// (src/replay/cpu.rs): integers and bool compare as int64 (uint64 saturates), f16 / bf16 / f32
// as float, f64 as double.
//
// Two paths, with the same results: scan_wide (i64, u64, u32, f64) compares and keys every
// element in its 64-bit lane; scan_narrow (the integers up to 32 bits, f16, bf16, f32) works in
// a 32-bit lane and looks for positions only in the vectors that hold an offender or a zero, so
// that the many elements of a 16-byte vector of small types do not make it compute-bound
// (uint8 went from 23 % to 74 % of a device copy's bandwidth on an H100, f16 from 33 % to 94 %:
// benches/RESULTS.md).
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

// Element readers: the stored type, how it widens into its lane, and its narrow lane: the
// 32-bit type every value fits (i32 for the integers up to 32 bits, float for the half types and
// f32), in which scan_narrow compares; the 64-bit types (scan_wide) keep their lane there.
#define READER(NAME, ELEM, LANE, IS_FLOAT, NARROW_T, BODY)                                      \
    struct NAME {                                                                              \
        typedef ELEM Elem;                                                                     \
        typedef LANE Lane;                                                                     \
        typedef NARROW_T Narrow;                                                               \
        enum { FLOAT = IS_FLOAT };                                                             \
        static __device__ __forceinline__ LANE read(ELEM x) BODY                               \
        static __device__ __forceinline__ NARROW_T narrow(ELEM x) { return (NARROW_T)read(x); } \
    };

READER(ReadU8, u8, i64, 0, i32, { return (i64)x; })
READER(ReadI8, i8, i64, 0, i32, { return (i64)x; })
READER(ReadI16, i16, i64, 0, i32, { return (i64)x; })
READER(ReadU16, u16, i64, 0, i32, { return (i64)x; })
READER(ReadI32, i32, i64, 0, i32, { return (i64)x; })
READER(ReadU32, u32, i64, 0, i64, { return (i64)x; })
READER(ReadI64, i64, i64, 0, i64, { return x; })
// Values above INT64_MAX saturate, as on the CPU.
READER(ReadU64, u64, i64, 0, i64, { return x > 0x7fffffffffffffffull ? (i64)0x7fffffffffffffffll : (i64)x; })
// Exact widening (subnormals, infinities and NaN included) by the hardware conversion.
READER(ReadF16, u16, float, 1, float, {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
})
READER(ReadBF16, u16, float, 1, float, { return __uint_as_float(((u32)x) << 16); })
READER(ReadF32, float, float, 1, float, { return x; })
READER(ReadF64, double, double, 1, double, { return x; })

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

__device__ __forceinline__ Acc acc_empty() {
    Acc a;
    a.count = 0;
    a.kmin = NONE;
    a.kmax = 0;
    a.first = NONE;
    a.zero = NONE;
    return a;
}

// An offending element at flat position `pos`: counted, the first one kept, and its position
// collected while the slots last.
__device__ __forceinline__ void acc_offense(Acc &acc, bool &room, u64 pos, u64 cap, u64 *out) {
    acc.count++;
    if (acc.first == NONE) acc.first = pos;
    if (room) {
        const u64 slot = atomicAdd(&out[OUT_SLOTS], 1ull);
        if (slot < cap) {
            out[OUT_POS + slot] = pos;
        } else {
            room = false;
        }
    }
}

// Warp, then block reduction of what each thread found; one atomic per block and field.
__device__ __forceinline__ void block_publish(Acc acc, u64 *out) {
    for (int d = 16; d > 0; d >>= 1) acc_merge(acc, acc_shfl_down(acc, d));
    __shared__ Acc warps[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warps[warp] = acc;
    __syncthreads();
    if (warp != 0) return;
    const int nwarps = (blockDim.x + 31) >> 5;
    acc = lane < nwarps ? warps[lane] : acc_empty();
    for (int d = 16; d > 0; d >>= 1) acc_merge(acc, acc_shfl_down(acc, d));
    if (lane == 0) {
        if (acc.count) atomicAdd(&out[OUT_COUNT], acc.count);
        if (acc.kmin != NONE) atomicMin(&out[OUT_MIN], acc.kmin);
        if (acc.kmax != 0) atomicMax(&out[OUT_MAX], acc.kmax);
        if (acc.first != NONE) atomicMin(&out[OUT_FIRST], acc.first);
        if (acc.zero != NONE) atomicMin(&out[OUT_ZERO], acc.zero);
    }
}

// Sixteen bytes of elements, read at once.
template <typename E>
union Vector {
    uint4 raw;
    E e[16 / sizeof(E)];
};

// One thread's share of the 16-byte vectors that hold elements [begin, end) of `data` (a
// 16-byte aligned buffer whose size is a multiple of 16 bytes), grid-stride: calls
// visit(the vector's 16 bytes, index of its first element) for each.
template <typename E, typename F>
__device__ __forceinline__ void for_each_vector(const uint4 *__restrict__ data, u64 begin, u64 end,
                                                F visit) {
    const u64 per = 16 / sizeof(E);
    const u64 vend = (end + per - 1) / per;
    const u32 stride = gridDim.x * blockDim.x;  // the whole grid (the host launches far fewer than 2^32 threads)
    for (u64 v = begin / per + (u64)blockIdx.x * blockDim.x + threadIdx.x; v < vend; v += stride) {
        visit(data[v], v * per);
    }
}

// The wide path (64-bit lanes: i64, u64, u32, f64): every element compared and keyed in its lane.
// Scans elements [begin, end) of `data`; position i is reported as base + i.
template <typename R>
__device__ __forceinline__ void scan_wide(const uint4 *__restrict__ data, u64 begin, u64 end,
                                          u64 base, u64 lo_bits, u64 hi_bits, u64 skip_bits,
                                          int has_skip, int collect, u64 cap, u64 *out) {
    typedef typename R::Elem E;
    typedef typename R::Lane L;
    const u64 per = 16 / sizeof(E);
    L lo, hi, skip;
    from_bits(lo_bits, lo);
    from_bits(hi_bits, hi);
    from_bits(skip_bits, skip);

    Acc acc = acc_empty();
    bool room = collect != 0;
    for_each_vector<E>(data, begin, end, [&](uint4 raw, u64 i0) {
        Vector<E> u;
        u.raw = raw;
        const bool whole = i0 >= begin && i0 + per <= end;
#pragma unroll
        for (u64 j = 0; j < per; j++) {
            const u64 i = i0 + j;
            if (!whole && (i < begin || i >= end)) continue;
            const L x = R::read(u.e[j]);
            if (!lane_nan(x)) {
                const u64 k = lane_key(x);
                acc.kmin = k < acc.kmin ? k : acc.kmin;
                acc.kmax = k > acc.kmax ? k : acc.kmax;
                if (R::FLOAT && x == (L)0 && acc.zero == NONE) acc.zero = base + i;
            }
            if (!(x >= lo && x <= hi) && !(has_skip && x == skip)) acc_offense(acc, room, base + i, cap, out);
        }
    });
    block_publish(acc, out);
}

// Bounds in the narrow lane. Integers: every value fits an i32, so clamping the i64 bounds to
// the i32 range changes no answer, and an interval that lies outside it (or is empty) becomes
// lo > hi; a skip value outside it matches nothing. Floats: the host passes float bits.
__device__ __forceinline__ void narrow_bounds(u64 lo_bits, u64 hi_bits, u64 skip_bits, int has_skip,
                                              i32 &lo, i32 &hi, i32 &skip, bool &use_skip) {
    const i64 l = (i64)lo_bits, h = (i64)hi_bits, s = (i64)skip_bits;
    const i64 imin = -2147483647ll - 1, imax = 2147483647ll;
    if (l > imax || h < imin || l > h) {
        lo = 1;
        hi = 0;
    } else {
        lo = (i32)(l < imin ? imin : l);
        hi = (i32)(h > imax ? imax : h);
    }
    use_skip = has_skip && s >= imin && s <= imax;
    skip = (i32)s;
}

__device__ __forceinline__ void narrow_bounds(u64 lo_bits, u64 hi_bits, u64 skip_bits, int has_skip,
                                              float &lo, float &hi, float &skip, bool &use_skip) {
    from_bits(lo_bits, lo);
    from_bits(hi_bits, hi);
    from_bits(skip_bits, skip);
    use_skip = has_skip != 0;
}

// Running min / max in the narrow lane. Integers start at the opposite extremes (a thread that
// saw no element is told by `seen`); floats start at NaN, which fminf / fmaxf drop, so NaN
// elements never count and a NaN left at the end means no number was seen.
__device__ __forceinline__ void narrow_start(i32 &lo, i32 &hi) {
    lo = 2147483647;
    hi = -2147483647 - 1;
}
__device__ __forceinline__ void narrow_start(float &lo, float &hi) {
    lo = __int_as_float(0x7fffffff);
    hi = lo;
}
__device__ __forceinline__ i32 narrow_min(i32 a, i32 b) { return min(a, b); }
__device__ __forceinline__ i32 narrow_max(i32 a, i32 b) { return max(a, b); }
__device__ __forceinline__ float narrow_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float narrow_max(float a, float b) { return fmaxf(a, b); }

// The narrow min / max as the lane's keys (what the wide path computes per element).
__device__ __forceinline__ void narrow_keys(Acc &acc, i32 lo, i32 hi, bool seen) {
    if (!seen) return;
    acc.kmin = lane_key((i64)lo);
    acc.kmax = lane_key((i64)hi);
}
__device__ __forceinline__ void narrow_keys(Acc &acc, float lo, float hi, bool) {
    if (lo != lo) return;
    acc.kmin = lane_key(lo);
    acc.kmax = lane_key(hi);
}

// Whether x offends: outside [lo, hi] (NaN always) and not the skip value.
template <bool SKIP, typename N>
__device__ __forceinline__ bool narrow_bad(N x, N lo, N hi, N skip) {
    const bool inside = (x >= lo) & (x <= hi);
    return SKIP ? !(inside | (x == skip)) : !inside;
}

// Elements [j0, j1) of one vector in the narrow lane: whether none of them offends, and the
// running min, max and (floats) smallest magnitude. WHOLE vectors (all but the two at the
// range's ends) are compiled without the bounds tests. The loop is unrolled, so the elements stay
// in registers.
template <typename R, bool SKIP, bool WHOLE>
__device__ __forceinline__ bool narrow_vector(const Vector<typename R::Elem> &u, u32 j0, u32 j1,
                                              typename R::Narrow lo, typename R::Narrow hi,
                                              typename R::Narrow skip, typename R::Narrow &vmin,
                                              typename R::Narrow &vmax, float &magnitude) {
    typedef typename R::Narrow N;
    const u32 per = 16 / sizeof(typename R::Elem);
    bool ok = true;
#pragma unroll
    for (u32 j = 0; j < per; j++) {
        if (!WHOLE && (j < j0 || j >= j1)) continue;
        const N x = R::narrow(u.e[j]);
        ok &= !narrow_bad<SKIP>(x, lo, hi, skip);
        vmin = narrow_min(vmin, x);
        vmax = narrow_max(vmax, x);
        if (R::FLOAT) magnitude = fminf(magnitude, fabsf((float)x));
    }
    return ok;
}

// The fast path's loop, with or without a skip value (a compile-time choice, so the comparison
// costs nothing when there is none). A vector costs, per element, its conversion, two
// comparisons folded into one flag, the running min and max, and for floats the smallest
// magnitude (does the vector hold a zero?); the positions of offenders and of the first zero
// are looked for only in the rare vectors that have them.
template <typename R, bool SKIP>
__device__ __forceinline__ void narrow_loop(const uint4 *__restrict__ data, u64 begin, u64 end,
                                            u64 base, typename R::Narrow lo, typename R::Narrow hi,
                                            typename R::Narrow skip, int collect, u64 cap, u64 *out) {
    typedef typename R::Elem E;
    typedef typename R::Narrow N;
    const u32 per = 16 / sizeof(E);
    N vmin, vmax;
    narrow_start(vmin, vmax);
    bool seen = false;

    Acc acc = acc_empty();
    bool room = collect != 0;
    for_each_vector<E>(data, begin, end, [&](uint4 raw, u64 i0) {
        Vector<E> u;
        u.raw = raw;
        // Elements [j0, j1) of the vector lie in [begin, end): all of them but at the two ends.
        const u32 j0 = i0 < begin ? (u32)(begin - i0) : 0;
        const u32 j1 = i0 + per > end ? (u32)(end - i0) : per;
        float magnitude = 1.0f;
        const bool ok = j0 == 0 && j1 == per
                            ? narrow_vector<R, SKIP, true>(u, j0, j1, lo, hi, skip, vmin, vmax, magnitude)
                            : narrow_vector<R, SKIP, false>(u, j0, j1, lo, hi, skip, vmin, vmax, magnitude);
        seen = true;
        if (!ok) {
#pragma unroll
            for (u32 j = 0; j < per; j++) {
                if (j < j0 || j >= j1) continue;
                if (narrow_bad<SKIP>(R::narrow(u.e[j]), lo, hi, skip)) acc_offense(acc, room, base + i0 + j, cap, out);
            }
        }
        if (R::FLOAT && magnitude == 0.0f && acc.zero == NONE) {
            u64 zero = NONE;
#pragma unroll
            for (u32 j = per; j-- > 0;) {
                if (j >= j0 && j < j1 && R::narrow(u.e[j]) == (N)0) zero = base + i0 + j;
            }
            acc.zero = zero;
        }
    });
    narrow_keys(acc, vmin, vmax, seen);
    block_publish(acc, out);
}

// The fast path, for the types whose values fit a 32-bit lane: same results as scan_wide.
template <typename R>
__device__ __forceinline__ void scan_narrow(const uint4 *__restrict__ data, u64 begin, u64 end,
                                            u64 base, u64 lo_bits, u64 hi_bits, u64 skip_bits,
                                            int has_skip, int collect, u64 cap, u64 *out) {
    typename R::Narrow lo, hi, skip;
    bool use_skip;
    narrow_bounds(lo_bits, hi_bits, skip_bits, has_skip, lo, hi, skip, use_skip);
    if (use_skip) {
        narrow_loop<R, true>(data, begin, end, base, lo, hi, skip, collect, cap, out);
    } else {
        narrow_loop<R, false>(data, begin, end, base, lo, hi, skip, collect, cap, out);
    }
}

// (THREADS, 8): at most 32 registers a thread, so all 8 blocks per multiprocessor that the host
// launches (src/replay/gpu/device.rs, BLOCKS_PER_SM) are resident at once: one wave, no tail.
#define SCAN_KERNEL(NAME, READER, PATH)                                                         \
    extern "C" __global__ void __launch_bounds__(THREADS, 8)                                   \
        NAME(const uint4 *__restrict__ data, u64 begin, u64 end, u64 base, u64 lo_bits,       \
             u64 hi_bits, u64 skip_bits, int has_skip, int collect, u64 cap, u64 *out) {      \
        PATH<READER>(data, begin, end, base, lo_bits, hi_bits, skip_bits, has_skip, collect,   \
                     cap, out);                                                                \
    }

SCAN_KERNEL(scan_u8, ReadU8, scan_narrow)
SCAN_KERNEL(scan_i8, ReadI8, scan_narrow)
SCAN_KERNEL(scan_i16, ReadI16, scan_narrow)
SCAN_KERNEL(scan_u16, ReadU16, scan_narrow)
SCAN_KERNEL(scan_i32, ReadI32, scan_narrow)
SCAN_KERNEL(scan_u32, ReadU32, scan_wide)
SCAN_KERNEL(scan_i64, ReadI64, scan_wide)
SCAN_KERNEL(scan_u64, ReadU64, scan_wide)
SCAN_KERNEL(scan_f16, ReadF16, scan_narrow)
SCAN_KERNEL(scan_bf16, ReadBF16, scan_narrow)
SCAN_KERNEL(scan_f32, ReadF32, scan_narrow)
SCAN_KERNEL(scan_f64, ReadF64, scan_wide)
