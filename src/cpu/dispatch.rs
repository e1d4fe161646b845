//! The dispatch macro: one generic kernel body, compiled once per instruction-set variant and
//! called through one safe entry point.

/// Define `$name(path, args…)`, which runs the `#[inline(always)]` generic `$body::<FMA>`
/// compiled for `path`: AVX-512 and AVX2+FMA through `#[target_feature]` functions on
/// x86-64, the build's own target otherwise (`FMA` where the target has it: aarch64).
/// `path` must be [`CpuPath::supported`]; the callers take it from [`selected`] or
/// [`CpuPath::available`].
macro_rules! dispatch_fn {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {
        $(#[$doc])*
        $vis fn $name(path: $crate::cpu::CpuPath, $($arg: $ty),*) $(-> $ret)? {
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
                    $crate::cpu::CpuPath::Avx512
                        if $crate::cpu::CpuPath::Avx512.supported() =>
                    {
                        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked once, cached).
                        return unsafe { avx512($($arg),*) };
                    }
                    $crate::cpu::CpuPath::Avx2
                        if $crate::cpu::CpuPath::Avx2.supported() =>
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
pub(crate) use dispatch_fn;
