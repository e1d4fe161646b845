// Masked argmax and masked softmax-sample over one f32 logits row, for the decode
// loop: the grammar's allowed-token mask comes in as packed u32 words (bit i % 32 of
// word i / 32, toktrie's SimpleVob layout) and one token id goes out, so the host
// never copies the row. The semantics are defined by the CPU reference,
// src/kernels/reference.rs (masked_argmax, masked_sample); tests/kernels_masked_pick.rs
// compares the two.
//
// Launch: ONE block of BLOCK_THREADS threads (a decode step has one row; a single
// block needs no inter-block atomics, no zeroed scratch and gives the same result
// every run). A warp reads 32 consecutive tokens and the one mask word that covers
// them, so each load is one coalesced 128-byte line (or a broadcast).
//
// Output: out[0] = token id, or NO_TOKEN (0xffffffff) when nothing can be chosen.

#include <stdint.h>

#define BLOCK_THREADS 1024
#define WARPS (BLOCK_THREADS / 32)
#define NO_TOKEN 0xffffffffu
#define FULL 0xffffffffu

// A candidate as (order key, id). key is the float's bits mapped to an unsigned
// order (larger float -> larger key); 0 means "no candidate": the smallest real key,
// that of -inf, is 0x007fffff, and NaN never becomes a candidate.
struct Cand {
    uint32_t key;
    uint32_t id;
};

__device__ __forceinline__ uint32_t order_key(float v) {
    uint32_t b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Higher key wins; equal keys go to the lower id (ties -> lowest id).
__device__ __forceinline__ Cand better(Cand a, Cand b) {
    if (b.key > a.key || (b.key == a.key && b.key != 0 && b.id < a.id)) return b;
    return a;
}

__device__ __forceinline__ Cand warp_best(Cand c) {
    for (int off = 16; off > 0; off >>= 1) {
        Cand o;
        o.key = __shfl_down_sync(FULL, c.key, off);
        o.id = __shfl_down_sync(FULL, c.id, off);
        c = better(c, o);
    }
    return c;
}

__device__ __forceinline__ bool is_allowed(uint32_t word, int lane, uint32_t i, uint32_t n) {
    return i < n && ((word >> lane) & 1u);
}

// The block's masked argmax; every thread gets the result.
__device__ Cand block_argmax(const float *logits, const uint32_t *mask, uint32_t n,
                             uint32_t n_words) {
    __shared__ Cand per_warp[WARPS];
    __shared__ Cand result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    Cand best = {0u, NO_TOKEN};
    // Block-strided: each iteration's loads are independent, so the unrolled loop
    // keeps several in flight (one block is latency-bound, not bandwidth-bound).
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < n; i += BLOCK_THREADS) {
        const uint32_t w = i >> 5;
        if (w >= n_words) break;
        if ((mask[w] >> (i & 31)) & 1u) {
            const float v = logits[i];
            if (!isnan(v)) best = better(best, Cand{order_key(v), i});
        }
    }
    best = warp_best(best);
    if (lane == 0) per_warp[warp] = best;
    __syncthreads();
    if (warp == 0) {
        Cand c = per_warp[lane];  // WARPS == 32: one per lane
        c = warp_best(c);
        if (lane == 0) result = c;
    }
    __syncthreads();
    return result;
}

extern "C" __global__ void masked_argmax_f32(const float *logits, const uint32_t *mask,
                                             uint32_t n, uint32_t n_words, uint32_t *out) {
    const Cand best = block_argmax(logits, mask, n, n_words);
    if (threadIdx.x == 0) out[0] = best.key == 0 ? NO_TOKEN : best.id;
}

// Weight of token i (0 when masked, past the row, or NaN), as the reference
// defines it: exp((l - m) / temperature) in f32.
__device__ __forceinline__ float token_weight(const float *logits, uint32_t word, int lane,
                                              uint32_t i, uint32_t n, float m, float temperature) {
    if (!is_allowed(word, lane, i, n)) return 0.0f;
    const float v = logits[i];
    if (isnan(v)) return 0.0f;
    return expf((v - m) / temperature);
}

// Inclusive prefix sum over the warp's lanes.
__device__ __forceinline__ float warp_inclusive_sum(float x) {
    const int lane = threadIdx.x & 31;
    for (int off = 1; off < 32; off <<= 1) {
        const float y = __shfl_up_sync(FULL, x, off);
        if (lane >= off) x += y;
    }
    return x;
}

// Inverse-CDF draw. Warp w owns the contiguous words [w * per, (w + 1) * per), so
// id order is warp order, then word order, then lane order. Each warp sums its
// words (same arithmetic in the sum and in the later walk, so the walk finds the
// boundary the sums promised); thread 0 finds the warp whose range holds u * total;
// that warp walks its words again to the first token whose running sum exceeds it.
extern "C" __global__ void masked_sample_f32(const float *logits, const uint32_t *mask,
                                             uint32_t n, uint32_t n_words, float temperature,
                                             float u, uint32_t *out) {
    __shared__ float warp_total[WARPS];
    __shared__ float warp_prefix[WARPS];
    __shared__ int chosen_warp;
    __shared__ float target;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    const Cand best = block_argmax(logits, mask, n, n_words);
    if (best.key == 0) {
        if (threadIdx.x == 0) out[0] = NO_TOKEN;
        return;
    }
    const float m = logits[best.id];
    // No spread (temperature not > 0, NaN included) or an infinite best: argmax.
    if (!(temperature > 0.0f) || isinf(m)) {
        if (threadIdx.x == 0) out[0] = best.id;
        return;
    }

    const uint32_t per = (n_words + WARPS - 1) / WARPS;
    const uint32_t w_begin = min(warp * per, n_words), w_end = min(w_begin + per, n_words);
    float running = 0.0f;
#pragma unroll 4
    for (uint32_t w = w_begin; w < w_end; ++w) {
        const uint32_t word = mask[w];
        const float x = token_weight(logits, word, lane, w * 32 + lane, n, m, temperature);
        running += __shfl_sync(FULL, warp_inclusive_sum(x), 31);
    }
    if (lane == 0) warp_total[warp] = running;
    __syncthreads();

    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int k = 0; k < WARPS; ++k) {
            warp_prefix[k] = total;
            total += warp_total[k];
        }
        // total >= 1 (the best token weighs exp(0)); keep the target strictly below
        // it so some warp's range holds it even when u * total rounds up.
        float t = u * total;
        if (t >= total) t = nextafterf(total, 0.0f);
        int k = 0;
        while (k < WARPS - 1 && !(warp_prefix[k] + warp_total[k] > t)) ++k;
        chosen_warp = k;
        target = t;
    }
    __syncthreads();
    if (warp != chosen_warp) return;

    // Walk again with the same arithmetic; compare prefix + running + scan with the
    // target, which is how thread 0 compared the warp totals.
    running = 0.0f;
    const float prefix = warp_prefix[warp];
    uint32_t last_positive = best.id;
    for (uint32_t w = w_begin; w < w_end; ++w) {
        const uint32_t word = mask[w];
        const uint32_t i = w * 32 + lane;
        const float x = token_weight(logits, word, lane, i, n, m, temperature);
        const float scan = warp_inclusive_sum(x);
        const uint32_t hit = __ballot_sync(FULL, x > 0.0f && prefix + (running + scan) > target);
        if (hit != 0) {
            if (lane == 0) out[0] = w * 32 + (__ffs(hit) - 1);
            return;
        }
        const uint32_t positive = __ballot_sync(FULL, x > 0.0f);
        if (positive != 0) last_positive = w * 32 + (31 - __clz(positive));
        running += __shfl_sync(FULL, scan, 31);
    }
    // Rounding left no token past the target: the last one with weight, as the
    // reference does.
    if (lane == 0) out[0] = last_positive;
}
