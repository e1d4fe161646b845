//! Shared CPU math for the hand-written f32 kernels (`attention`,
//! `flash_cpu`, `gelu`) and the run-time choice of their instruction set.
//!
//! # Kernel paths
//!
//! Every hot loop is written once, as `#[inline(always)]` code generic over `FMA` (whether
//! `a * b + c` may be one fused instruction), and compiled three times on x86-64: inside a
//! `#[target_feature(enable = "avx512f,…")]` function, inside an `avx2,fma` one, and for
//! the build's own target (baseline x86-64, SSE2, for the README's `cargo build --release`).
//! The register tiles of the fused attention also have hand-written AVX-512 and AVX2
//! kernels. [`selected`] picks the path once per process from CPUID, so a default build
//! runs the AVX-512 or AVX2 code on CPUs that have it. On aarch64 NEON and FMA are part
//! of the baseline, so the generic code compiled for the target (with `FMA`) is the NEON
//! path, and `portable` there runs the same code.
//!
//! `SIGHTLINE_CPU_FEATURES=avx512|avx2|portable` (read once) forces a path, so one machine
//! can measure the others. Forcing a path the CPU lacks does not fail: the best path the
//! CPU has below the requested one is used, and [`selected`]'s `warning` says so (the
//! `bench` command prints it). An unknown value is treated the same way (automatic choice,
//! with a warning).

use candle_core::{CpuStorage, Layout, Storage, StorageRef, Tensor};

/// The environment variable that forces a kernel path.
pub const CPU_FEATURES_ENV: &str = "SIGHTLINE_CPU_FEATURES";

/// Which compiled variant of the hand-written kernels runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuPath {
    /// Plain Rust compiled for the build's target (SSE2 on a default x86-64 build).
    Portable,
    /// aarch64: the generic code with NEON and FMA (both baseline there).
    Neon,
    /// x86-64 with AVX2 and FMA.
    Avx2,
    /// x86-64 with AVX-512F (and AVX2, FMA).
    Avx512,
}

impl CpuPath {
    /// The name printed by `bench` and accepted by [`CPU_FEATURES_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            CpuPath::Portable => "portable",
            CpuPath::Neon => "neon",
            CpuPath::Avx2 => "avx2",
            CpuPath::Avx512 => "avx512",
        }
    }

    /// How `bench` labels the path.
    pub fn label(self) -> &'static str {
        match self {
            CpuPath::Portable => "portable",
            CpuPath::Neon => "NEON",
            CpuPath::Avx2 => "AVX2+FMA",
            CpuPath::Avx512 => "AVX-512",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" => Some(CpuPath::Portable),
            "neon" => Some(CpuPath::Neon),
            "avx2" => Some(CpuPath::Avx2),
            "avx512" | "avx-512" => Some(CpuPath::Avx512),
            _ => None,
        }
    }

    /// Whether this CPU can run the path.
    pub fn supported(self) -> bool {
        match self {
            CpuPath::Portable => true,
            CpuPath::Neon => cfg!(target_arch = "aarch64"),
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            CpuPath::Avx2 | CpuPath::Avx512 => false,
        }
    }

    /// Every path this CPU can run, fastest first (for tests and measurements).
    pub fn available() -> Vec<CpuPath> {
        [
            CpuPath::Avx512,
            CpuPath::Avx2,
            CpuPath::Neon,
            CpuPath::Portable,
        ]
        .into_iter()
        .filter(|p| p.supported())
        .collect()
    }

    /// The best path this CPU supports.
    pub fn detect() -> CpuPath {
        Self::available()
            .first()
            .copied()
            .unwrap_or(CpuPath::Portable)
    }
}

/// The path in use and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The path the kernels run.
    pub path: CpuPath,
    /// The value of [`CPU_FEATURES_ENV`], if set.
    pub requested: Option<String>,
    /// Why the request was not followed, if it was not.
    pub warning: Option<String>,
}

/// Resolve a [`CPU_FEATURES_ENV`] value against this CPU (pure: for tests).
pub fn resolve(requested: Option<&str>) -> Selection {
    let best = CpuPath::detect();
    let requested_owned = requested.map(str::to_string);
    let Some(raw) = requested.filter(|s| !s.trim().is_empty()) else {
        return Selection {
            path: best,
            requested: requested_owned,
            warning: None,
        };
    };
    match CpuPath::parse(raw) {
        None => Selection {
            path: best,
            requested: requested_owned,
            warning: Some(format!(
                "{CPU_FEATURES_ENV}={raw:?} is not one of avx512, avx2, neon, portable; using {}",
                best.name()
            )),
        },
        Some(p) if p.supported() => Selection {
            path: p,
            requested: requested_owned,
            warning: None,
        },
        Some(p) => {
            // The best supported path not above the request (portable at worst).
            let fallback = CpuPath::available()
                .into_iter()
                .find(|&a| a <= p)
                .unwrap_or(CpuPath::Portable);
            Selection {
                path: fallback,
                requested: requested_owned,
                warning: Some(format!(
                    "{CPU_FEATURES_ENV}={raw}: this CPU cannot run the {} kernels; using {}",
                    p.name(),
                    fallback.name()
                )),
            }
        }
    }
}

/// The process-wide kernel path: [`CPU_FEATURES_ENV`] and CPUID, read on first use.
pub fn selected() -> &'static Selection {
    static SELECTION: std::sync::OnceLock<Selection> = std::sync::OnceLock::new();
    SELECTION.get_or_init(|| {
        let env = std::env::var(CPU_FEATURES_ENV).ok();
        resolve(env.as_deref())
    })
}

/// The kernel path in use (see [`selected`]).
pub fn path() -> CpuPath {
    selected().path
}

/// candle's switch that holds its repacked quantized matmuls at their AVX2 level.
pub const CANDLE_FORCE_AVX2_ENV: &str = "MISTRALRS_FORCE_AVX2";

/// candle's switch that holds its repacked quantized matmuls at their AVX-VNNI level
/// (below AVX-512 VNNI, above AVX2), which Sightline's quantized kernels follow too: how
/// an AVX-512 machine measures an Intel Alder Lake-class CPU's quantized matmuls.
pub const CANDLE_FORCE_AVXVNNI_ENV: &str = "MISTRALRS_FORCE_AVXVNNI";

/// Make a forced path below AVX-512 hold candle's quantized kernels at AVX2 too: sets
/// [`CANDLE_FORCE_AVX2_ENV`]`=1` when [`CPU_FEATURES_ENV`] forces `avx2` or `portable`
/// and the variable is unset, so a forced run measures what an AVX2-only CPU runs (the
/// quantized matmuls are most of prefill and decode). Returns whether it set it.
///
/// Call it first thing in `main`, before any thread starts and before the first
/// quantized matmul (candle reads the variable once).
pub fn apply_forced_path_to_candle() -> bool {
    let s = selected();
    let forced_low = s.requested.is_some() && matches!(s.path, CpuPath::Avx2 | CpuPath::Portable);
    if forced_low && std::env::var_os(CANDLE_FORCE_AVX2_ENV).is_none() {
        std::env::set_var(CANDLE_FORCE_AVX2_ENV, "1");
        return true;
    }
    false
}

/// The tier of candle's repacked quantized CPU matmuls, as candle itself picks it
/// (`quantized/repack_x86.rs`, `level()`), honouring [`CANDLE_FORCE_AVX2_ENV`] and
/// [`CANDLE_FORCE_AVXVNNI_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandleQuantTier {
    /// AVX-512 VNNI; `amx`: CPUID reports AMX-TILE and AMX-INT8 (Q4_K prefill tiles).
    Avx512Vnni {
        /// AMX tiles are used for Q4_K prefill.
        amx: bool,
    },
    /// AVX-VNNI (256-bit `vpdpbusd`); `forced`: held there by [`CANDLE_FORCE_AVXVNNI_ENV`].
    AvxVnni {
        /// Held at AVX-VNNI by the environment although the CPU has AVX-512 VNNI.
        forced: bool,
    },
    /// AVX2 (`maddubs`); `forced`: held there by [`CANDLE_FORCE_AVX2_ENV`].
    Avx2 {
        /// Held at AVX2 by the environment although the CPU has more.
        forced: bool,
    },
    /// No repacked path (no AVX2, or not x86-64 and not aarch64).
    Unrepacked,
    /// aarch64: candle detects NEON dot-product / i8mm itself.
    Neon,
}

impl CandleQuantTier {
    /// How `bench` labels the tier.
    pub fn label(self) -> &'static str {
        match self {
            CandleQuantTier::Avx512Vnni { amx: true } => "AVX-512 VNNI (+AMX for Q4_K prefill)",
            CandleQuantTier::Avx512Vnni { amx: false } => "AVX-512 VNNI",
            CandleQuantTier::AvxVnni { forced: true } => "AVX-VNNI (forced)",
            CandleQuantTier::AvxVnni { forced: false } => "AVX-VNNI",
            CandleQuantTier::Avx2 { forced: true } => "AVX2 (forced)",
            CandleQuantTier::Avx2 { forced: false } => "AVX2",
            CandleQuantTier::Unrepacked => "unrepacked (no AVX2)",
            CandleQuantTier::Neon => "NEON (candle's own detection)",
        }
    }
}

/// The tier candle's repacked quantized CPU matmuls run at (see [`CandleQuantTier`]).
pub fn candle_quantized_tier() -> CandleQuantTier {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let force_avx2 = std::env::var(CANDLE_FORCE_AVX2_ENV).as_deref() == Ok("1");
        let force_vnni = std::env::var(CANDLE_FORCE_AVXVNNI_ENV).as_deref() == Ok("1");
        if !force_avx2 && !force_vnni && has!("avx512f") && has!("avx512vnni") {
            // CPUID leaf 7: AMX-TILE (bit 24) and AMX-INT8 (bit 25), as candle reads them.
            let info = std::arch::x86_64::__cpuid_count(7, 0);
            let amx = info.edx & (1 << 25) != 0 && info.edx & (1 << 24) != 0;
            return CandleQuantTier::Avx512Vnni { amx };
        }
        if !force_avx2 && (force_vnni || has!("avxvnni")) && has!("avx2") {
            let forced = force_vnni && has!("avx512f") && has!("avx512vnni");
            return CandleQuantTier::AvxVnni { forced };
        }
        if has!("avx2") && has!("fma") {
            return CandleQuantTier::Avx2 { forced: force_avx2 };
        }
        CandleQuantTier::Unrepacked
    }
    #[cfg(target_arch = "aarch64")]
    {
        CandleQuantTier::Neon
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        CandleQuantTier::Unrepacked
    }
}

/// The instruction level candle's repacked quantized CPU matmuls run at, for `bench`'s
/// report ([`candle_quantized_tier`]'s label).
pub fn candle_quantized_level() -> &'static str {
    candle_quantized_tier().label()
}

/// Instruction-set features this CPU has that nothing in this build uses: not enabled at
/// compile time, and dispatched to at run time neither by the kernels here (AVX2+FMA,
/// AVX-512F) nor by candle (its quantized kernels detect AVX2, AVX-512 VNNI, AVX-VNNI and
/// AMX themselves). What is left only speeds up candle's f16/bf16 conversions, which are
/// compiled for the build's target. For `bench`'s warning.
pub fn undispatched_features() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        let checks: [(bool, bool, &'static str); 2] = [
            (
                std::arch::is_x86_feature_detected!("f16c"),
                cfg!(target_feature = "f16c"),
                "f16c",
            ),
            (
                std::arch::is_x86_feature_detected!("avx512bf16"),
                cfg!(target_feature = "avx512bf16"),
                "avx512bf16",
            ),
        ];
        checks
            .into_iter()
            .filter(|&(has, compiled, _)| has && !compiled)
            .map(|(_, _, name)| name)
            .collect()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// A CPU f32 tensor's storage, held read-locked with its layout: one struct where the
/// kernels used to nest a closure per input.
pub(super) struct CpuF32<'a> {
    storage: StorageRef<'a>,
    layout: &'a Layout,
}

impl<'a> CpuF32<'a> {
    /// `None` unless `t` lives on the CPU in f32.
    pub(super) fn of(t: &'a Tensor) -> Option<Self> {
        let (storage, layout) = t.storage_and_layout();
        matches!(&*storage, Storage::Cpu(CpuStorage::F32(_))).then_some(CpuF32 { storage, layout })
    }

    /// The whole buffer (index it with [`layout`](Self::layout)).
    pub(super) fn data(&self) -> &[f32] {
        match &*self.storage {
            Storage::Cpu(CpuStorage::F32(d)) => d,
            // `of` admits CPU f32 only.
            _ => &[],
        }
    }

    pub(super) fn layout(&self) -> &Layout {
        self.layout
    }

    /// The tensor's values when they are contiguous in the buffer.
    pub(super) fn contiguous(&self) -> Option<&[f32]> {
        let (a, b) = self.layout.contiguous_offsets()?;
        self.data().get(a..b)
    }
}

/// The inputs of one CPU attention call, read-locked and checked once: `q (groups, rep, n, hd)`
/// contiguous, `k`/`v` `(groups, len, hd)` with a unit inner stride (possibly views into a
/// larger KV-cache buffer), an optional contiguous `(n, len)` mask. Shared by the decode loop
/// (`attention.rs`) and the fused kernel (`flash_cpu.rs`).
pub(super) struct AttentionInputs<'a> {
    q: CpuF32<'a>,
    k: CpuF32<'a>,
    v: CpuF32<'a>,
    mask: Option<CpuF32<'a>>,
    /// Query groups (batch × KV heads).
    pub groups: usize,
    /// Query heads per group (GQA).
    pub rep: usize,
    /// Query rows per group (`rep * n`).
    pub rows: usize,
    /// Query positions per head.
    pub n: usize,
    /// Key positions.
    pub len: usize,
    /// Head dimension.
    pub hd: usize,
    /// Key strides (group, position).
    pub ks: [usize; 2],
    /// Value strides (group, position).
    pub vs: [usize; 2],
}

impl<'a> AttentionInputs<'a> {
    /// `None` when an input is not CPU f32, a dimension is empty, a layout is not one the
    /// kernels index directly, or a row they would index does not exist: the caller then
    /// takes the generic tensor route.
    pub(super) fn of(
        q: &'a Tensor,
        k: &'a Tensor,
        v: &'a Tensor,
        mask: Option<&'a Tensor>,
    ) -> candle_core::Result<Option<Self>> {
        let (groups, rep, n, hd) = q.dims4()?;
        let len = k.dim(1)?;
        let rows = rep * n;
        if groups == 0 || rows == 0 || len == 0 || hd == 0 {
            return Ok(None);
        }
        let (Some(q), Some(k), Some(v)) = (CpuF32::of(q), CpuF32::of(k), CpuF32::of(v)) else {
            return Ok(None);
        };
        let mask = match mask {
            Some(m) => match CpuF32::of(m) {
                Some(view) => Some(view),
                None => return Ok(None),
            },
            None => None,
        };
        let (&[ks0, ks1, 1], &[vs0, vs1, 1]) = (k.layout().stride(), v.layout().stride()) else {
            return Ok(None);
        };
        let inputs = AttentionInputs {
            q,
            k,
            v,
            mask,
            groups,
            rep,
            rows,
            n,
            len,
            hd,
            ks: [ks0, ks1],
            vs: [vs0, vs1],
        };
        let Some((q_data, k_data, v_data, mask_data)) = inputs.slices() else {
            return Ok(None);
        };
        // Every row the kernels index must exist (a view into a larger cache buffer).
        let last_row = |[s0, s1]: [usize; 2]| (groups - 1) * s0 + (len - 1) * s1 + hd;
        let fits = k_data.len() >= last_row(inputs.ks)
            && v_data.len() >= last_row(inputs.vs)
            && q_data.len() >= groups * rows * hd
            && mask_data.is_none_or(|m| m.len() == n * len);
        Ok(fits.then_some(inputs))
    }

    /// `(q, k, v, mask)`: `q` and the mask as contiguous values, `k` and `v` from their first
    /// element on (index them with [`ks`](Self::ks) / [`vs`](Self::vs)). `None` only when a
    /// layout is not contiguous where it must be, which [`of`](Self::of) has ruled out.
    #[allow(clippy::type_complexity)]
    pub(super) fn slices(&self) -> Option<(&[f32], &[f32], &[f32], Option<&[f32]>)> {
        let q = self.q.contiguous()?;
        let k = self.k.data().get(self.k.layout().start_offset()..)?;
        let v = self.v.data().get(self.v.layout().start_offset()..)?;
        let mask = match &self.mask {
            Some(m) => Some(m.contiguous()?),
            None => None,
        };
        Some((q, k, v, mask))
    }
}

/// `a * b + c`: one FMA instruction when `FMA` (only instantiate it so inside a function
/// compiled with the `fma` feature: elsewhere it is a libm call, far slower than the two
/// operations).
#[inline(always)]
pub(super) fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `exp(x)` for `x ≤ 0` (softmax arguments after the max is subtracted), Cephes'
/// `expf` polynomial: relative error below 2e-7 over [-87, 0]; below -87 (including
/// -inf from a mask) it returns 0; NaN stays NaN.
#[inline(always)]
pub(super) fn exp_nonpositive<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    /// 1.5 · 2²³: adding and subtracting it rounds a float of magnitude below 2²² to the
    /// nearest integer (ties to even) with two additions, which vectorize on every x86-64
    /// (`round_ties_even` needs SSE4.1 and is a libm call in a baseline build).
    const ROUND: f32 = 12_582_912.0;
    // Not `max`: a NaN must stay NaN.
    let xc = if x < -87.0 { -87.0 } else { x };
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = fmadd::<FMA>(-n, LN2_LO, fmadd::<FMA>(-n, LN2_HI, xc));
    let mut p = 1.987_569_1e-4f32;
    p = fmadd::<FMA>(p, r, 1.398_199_9e-3);
    p = fmadd::<FMA>(p, r, 8.333_452e-3);
    p = fmadd::<FMA>(p, r, 4.166_579_6e-2);
    p = fmadd::<FMA>(p, r, 1.666_666_5e-1);
    p = fmadd::<FMA>(p, r, 0.5);
    let e = fmadd::<FMA>(p * r, r, r) + 1.0;
    // 2^n by building the float's exponent field, n + 127 in [1, 127] after the clamp:
    // adding 2^23 puts that integer in the low mantissa bits, the shift moves it into
    // the exponent (float operations only, unlike an `as i32` cast, so it vectorizes).
    let two_n = f32::from_bits((n + 127.0 + 8_388_608.0).to_bits() << 23);
    if x < -87.0 {
        0.0
    } else {
        e * two_n
    }
}

/// Independent accumulator lanes of the reductions below: a plain `sum()` is one chain
/// of dependent float additions (about 4 cycles per element); 16 lanes fill one AVX-512
/// register or two AVX2 ones.
const LANES: usize = 16;

/// `a · b` in [`LANES`] independent lanes.
#[inline(always)]
pub(super) fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let split = a.len().min(b.len()) / LANES * LANES;
    for (x, y) in a[..split]
        .chunks_exact(LANES)
        .zip(b[..split].chunks_exact(LANES))
    {
        for i in 0..LANES {
            acc[i] = fmadd::<FMA>(x[i], y[i], acc[i]);
        }
    }
    let tail: f32 = a[split..].iter().zip(&b[split..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `out += p · x`.
#[inline(always)]
pub(super) fn axpy<const FMA: bool>(p: f32, x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = fmadd::<FMA>(p, v, *o);
    }
}

/// The largest value of `row` (`-inf` when empty; NaNs are skipped, as `f32::max`
/// does), in [`LANES`] lanes, which vectorize where a `max` fold does not.
#[inline(always)]
pub(super) fn max_of(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = if x > *a { x } else { *a };
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// `row[j] = exp(row[j] - max)`, returning the sum, in [`LANES`] lanes.
#[inline(always)]
pub(super) fn exp_sub_sum<const FMA: bool>(row: &mut [f32], max: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (x, a) in chunk.iter_mut().zip(acc.iter_mut()) {
            *x = exp_nonpositive::<FMA>(*x - max);
            *a += *x;
        }
    }
    let mut tail = 0f32;
    for x in chunks.into_remainder() {
        *x = exp_nonpositive::<FMA>(*x - max);
        tail += *x;
    }
    acc.iter().sum::<f32>() + tail
}

/// Define `$name(path, args…)`, which runs the `#[inline(always)]` generic `$body::<FMA>`
/// compiled for `path`: AVX-512 and AVX2+FMA through `#[target_feature]` functions on
/// x86-64, the build's own target otherwise (`FMA` where the target has it: aarch64).
/// `path` must be [`CpuPath::supported`]; the callers take it from [`selected`] or
/// [`CpuPath::available`].
macro_rules! dispatch_fn {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {
        $(#[$doc])*
        $vis fn $name(path: $crate::model::qwen3_vl::cpu::CpuPath, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                match path {
                    $crate::model::qwen3_vl::cpu::CpuPath::Avx512
                        if $crate::model::qwen3_vl::cpu::CpuPath::Avx512.supported() =>
                    {
                        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked once, cached).
                        return unsafe { avx512($($arg),*) };
                    }
                    $crate::model::qwen3_vl::cpu::CpuPath::Avx2
                        if $crate::model::qwen3_vl::cpu::CpuPath::Avx2.supported() =>
                    {
                        // SAFETY: the CPU has AVX2 and FMA.
                        return unsafe { avx2($($arg),*) };
                    }
                    _ => {}
                }
            }
            let _ = path;
            $body::<{ cfg!(target_arch = "aarch64") }>($($arg),*)
        }
    };
}
pub(super) use dispatch_fn;

/// Seconds `f` took on this thread's CPU (Linux's `/proc/thread-self/schedstat`, which
/// does not count time the scheduler gave to other processes: the kernel timings are taken
/// on a shared machine), or wall-clock seconds where that file is unreadable. Run the
/// timing tests with `CANDLE_NUM_THREADS=1` so all the work is on this thread.
#[cfg(test)]
pub(super) fn thread_cpu_seconds(mut f: impl FnMut()) -> f64 {
    fn on_cpu_ns() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    }
    let wall = std::time::Instant::now();
    let before = on_cpu_ns();
    f();
    match (before, on_cpu_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 * 1e-9,
        _ => wall.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The polynomial exponential against libm, per compiled variant.
    const EXP_RTOL: f32 = 2e-7;

    #[inline(always)]
    fn exp_many<const FMA: bool>(xs: &[f32], out: &mut [f32]) {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = exp_nonpositive::<FMA>(x);
        }
    }
    dispatch_fn!(fn exp_dispatched(xs: &[f32], out: &mut [f32]) => exp_many);

    #[test]
    fn exp_matches_libm_on_every_path_and_keeps_nan() {
        let xs: Vec<f32> = (0..=200_000)
            .map(|i| -87.0 * i as f32 / 200_000.0)
            .chain([f32::NEG_INFINITY, -1000.0, -87.5, f32::NAN, -0.0])
            .collect();
        for path in CpuPath::available() {
            let mut out = vec![0f32; xs.len()];
            exp_dispatched(path, &xs, &mut out);
            let mut worst = 0f32;
            for (&x, &y) in xs.iter().zip(&out).take(200_001) {
                worst = worst.max(((y - x.exp()) / x.exp()).abs());
            }
            assert!(worst < EXP_RTOL, "{path:?}: relative error {worst}");
            let n = xs.len();
            assert_eq!(&out[n - 5..n - 2], &[0.0, 0.0, 0.0], "{path:?}");
            assert!(out[n - 2].is_nan(), "{path:?}");
            assert_eq!(out[n - 1], 1.0, "{path:?}");
        }
    }

    #[test]
    fn forcing_a_path_resolves_against_the_cpu() {
        assert_eq!(resolve(None).path, CpuPath::detect());
        assert_eq!(resolve(Some("portable")).path, CpuPath::Portable);
        assert!(resolve(Some("portable")).warning.is_none());
        let unknown = resolve(Some("sse9"));
        assert_eq!(unknown.path, CpuPath::detect());
        assert!(unknown.warning.is_some_and(|w| w.contains("sse9")));
        for p in [CpuPath::Avx512, CpuPath::Avx2, CpuPath::Neon] {
            let s = resolve(Some(p.name()));
            if p.supported() {
                assert_eq!((s.path, s.warning), (p, None));
            } else {
                assert!(s.path < p || s.path == CpuPath::Portable, "{s:?}");
                assert!(s.path.supported() && s.warning.is_some(), "{s:?}");
            }
        }
    }
}
