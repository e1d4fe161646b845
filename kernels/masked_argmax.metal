// Masked argmax and masked softmax-sample over one f32 logits row: the Metal twin of
// masked_argmax.cu (read that file's header; the algorithm is the same line for
// line). The semantics are defined by the CPU reference, src/kernels/reference.rs.
//
// Compiled from source at first use (MTLDevice newLibraryWithSource); the host
// dispatches ONE threadgroup whose size is a multiple of 32, at most 1024.
// Assumes 32-wide SIMD groups, as on every Apple GPU: a SIMD group reads the 32
// tokens one mask word covers.
//
// Metal compiles with fast math by default, which may fold isnan()/isinf() to
// false; NaN and infinity are therefore tested on the bits, and exp is the
// precise one, so the weights match the reference's f32 exp closely.
//
// Output: out[0] = token id, or NO_TOKEN (0xffffffff) when nothing can be chosen.

#include <metal_stdlib>
using namespace metal;

constant uint NO_TOKEN = 0xffffffffu;
constant uint MAX_SIMDGROUPS = 32;

struct Cand {
    uint key;
    uint id;
};

inline bool is_nan_bits(float v) { return (as_type<uint>(v) & 0x7fffffffu) > 0x7f800000u; }
inline bool is_inf_bits(float v) { return (as_type<uint>(v) & 0x7fffffffu) == 0x7f800000u; }

// Larger float -> larger key; 0 is "no candidate" (-inf maps to 0x007fffff).
inline uint order_key(float v) {
    uint b = as_type<uint>(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Higher key wins; equal keys go to the lower id.
inline Cand better(Cand a, Cand b) {
    if (b.key > a.key || (b.key == a.key && b.key != 0 && b.id < a.id)) return b;
    return a;
}

inline Cand simd_best(Cand c) {
    for (ushort off = 16; off > 0; off >>= 1) {
        Cand o;
        o.key = simd_shuffle_down(c.key, off);
        o.id = simd_shuffle_down(c.id, off);
        c = better(c, o);
    }
    return c;
}

inline bool is_allowed(uint word, uint lane, uint i, uint n) {
    return i < n && ((word >> lane) & 1u);
}

// The threadgroup's masked argmax; every thread gets the result. `per_sg` and
// `result` are threadgroup memory owned by the calling kernel.
inline Cand group_argmax(device const float *logits, device const uint *mask, uint n,
                         uint n_words, uint tid, uint threads, uint lane, uint sg, uint n_sg,
                         threadgroup Cand *per_sg, threadgroup Cand *result) {
    Cand best = {0u, NO_TOKEN};
    for (uint i = tid; i < n; i += threads) {
        const uint w = i >> 5;
        if (w >= n_words) break;
        if ((mask[w] >> (i & 31u)) & 1u) {
            const float v = logits[i];
            if (!is_nan_bits(v)) best = better(best, Cand{order_key(v), i});
        }
    }
    best = simd_best(best);
    if (lane == 0) per_sg[sg] = best;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        Cand c = lane < n_sg ? per_sg[lane] : Cand{0u, NO_TOKEN};
        c = simd_best(c);
        if (lane == 0) *result = c;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return *result;
}

kernel void masked_argmax_f32(device const float *logits [[buffer(0)]],
                              device const uint *mask [[buffer(1)]],
                              constant uint &n [[buffer(2)]],
                              constant uint &n_words [[buffer(3)]],
                              device uint *out [[buffer(4)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint threads [[threads_per_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]],
                              uint sg [[simdgroup_index_in_threadgroup]],
                              uint n_sg [[simdgroups_per_threadgroup]]) {
    threadgroup Cand per_sg[MAX_SIMDGROUPS];
    threadgroup Cand result;
    const Cand best =
        group_argmax(logits, mask, n, n_words, tid, threads, lane, sg, n_sg, per_sg, &result);
    if (tid == 0) out[0] = best.key == 0 ? NO_TOKEN : best.id;
}

inline float token_weight(device const float *logits, uint word, uint lane, uint i, uint n,
                          float m, float temperature) {
    if (!is_allowed(word, lane, i, n)) return 0.0f;
    const float v = logits[i];
    if (is_nan_bits(v)) return 0.0f;
    return precise::exp((v - m) / temperature);
}

inline float simd_inclusive_sum(float x, uint lane) {
    for (ushort off = 1; off < 32; off <<= 1) {
        const float y = simd_shuffle_up(x, off);
        if (lane >= off) x += y;
    }
    return x;
}

// Inverse-CDF draw; see masked_sample_f32 in masked_argmax.cu for the why of each step.
kernel void masked_sample_f32(device const float *logits [[buffer(0)]],
                              device const uint *mask [[buffer(1)]],
                              constant uint &n [[buffer(2)]],
                              constant uint &n_words [[buffer(3)]],
                              constant float &temperature [[buffer(4)]],
                              constant float &u [[buffer(5)]],
                              device uint *out [[buffer(6)]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint threads [[threads_per_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]],
                              uint sg [[simdgroup_index_in_threadgroup]],
                              uint n_sg [[simdgroups_per_threadgroup]]) {
    threadgroup Cand per_sg[MAX_SIMDGROUPS];
    threadgroup Cand result;
    threadgroup float sg_total[MAX_SIMDGROUPS];
    threadgroup float sg_prefix[MAX_SIMDGROUPS];
    threadgroup uint chosen_sg;
    threadgroup float target;

    const Cand best =
        group_argmax(logits, mask, n, n_words, tid, threads, lane, sg, n_sg, per_sg, &result);
    if (best.key == 0) {
        if (tid == 0) out[0] = NO_TOKEN;
        return;
    }
    const float m = logits[best.id];
    // No spread (temperature not > 0, NaN included) or an infinite best: argmax.
    if (!(temperature > 0.0f) || is_nan_bits(temperature) || is_inf_bits(m)) {
        if (tid == 0) out[0] = best.id;
        return;
    }

    const uint per = (n_words + n_sg - 1) / n_sg;
    const uint w_begin = min(sg * per, n_words);
    const uint w_end = min(w_begin + per, n_words);
    float running = 0.0f;
    for (uint w = w_begin; w < w_end; ++w) {
        const uint word = mask[w];
        const float x = token_weight(logits, word, lane, w * 32 + lane, n, m, temperature);
        running += simd_broadcast(simd_inclusive_sum(x, lane), 31);
    }
    if (lane == 0) sg_total[sg] = running;
    threadgroup_barrier(mem_flags::mem_threadgroup);

    if (tid == 0) {
        float total = 0.0f;
        for (uint k = 0; k < n_sg; ++k) {
            sg_prefix[k] = total;
            total += sg_total[k];
        }
        // total >= 1 (the best token weighs exp(0)): the float just below it keeps
        // the target inside some SIMD group's range when u * total rounds up.
        float t = u * total;
        if (t >= total) t = as_type<float>(as_type<uint>(total) - 1u);
        uint k = 0;
        while (k + 1 < n_sg && !(sg_prefix[k] + sg_total[k] > t)) ++k;
        chosen_sg = k;
        target = t;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg != chosen_sg) return;

    running = 0.0f;
    const float prefix = sg_prefix[sg];
    const float goal = target;
    uint last_positive = best.id;
    for (uint w = w_begin; w < w_end; ++w) {
        const uint word = mask[w];
        const float x = token_weight(logits, word, lane, w * 32 + lane, n, m, temperature);
        const float scan = simd_inclusive_sum(x, lane);
        const bool hit = x > 0.0f && prefix + (running + scan) > goal;
        const uint first_hit = simd_min(hit ? lane : 32u);
        if (first_hit < 32u) {
            if (lane == 0) out[0] = w * 32 + first_hit;
            return;
        }
        if (simd_any(x > 0.0f)) last_positive = w * 32 + simd_max(x > 0.0f ? lane : 0u);
        running += simd_broadcast(scan, 31);
    }
    if (lane == 0) out[0] = last_positive;
}
