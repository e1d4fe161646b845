//! Which compiled variant of the hand-written kernels this CPU runs, chosen once from CPUID
//! (or forced with [`CPU_FEATURES_ENV`]).

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

#[cfg(test)]
mod tests {
    use super::*;

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
