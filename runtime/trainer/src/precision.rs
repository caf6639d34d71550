//! Mixed precision: the float type a run's forward passes compute in on its device (issue 47,
//! item 2), and the autocast region that applies it.
//!
//! Under [`crate::train::Budget::mixed_precision`] a forward pass runs under libtorch's autocast
//! (matrix products and convolutions in the reduced type, reductions and losses in float32; the
//! weights, gradients and Adam's state stay float32), in:
//! - bfloat16 on a CUDA device with bfloat16 arithmetic (compute capability 8.0 or more: A100,
//!   H100, H200) and on a CPU with it (`avx512_bf16` or `amx_bf16`): float32's exponent range, so
//!   small gradients do not underflow and no loss scaling is needed;
//! - float16 on an older CUDA device, with dynamic loss scaling (`crate::loss_scale`, PyTorch's
//!   `GradScaler` rule: small gradients would otherwise flush to zero in float16);
//! - float32 on a CPU without bfloat16 arithmetic (autocast would only add casts).
//!
//! `Budget::new` turns it on by default where it is bfloat16 on CUDA (`DECISIONS.md`, "Mixed
//! precision"); on the CPU it stays off by default and is turned on by asking.
//! `EASEML_MIXED_PRECISION=float16` forces float16 (with loss scaling) on CUDA and the CPU alike:
//! the test of the older GPUs' path where bfloat16 exists.

use std::sync::OnceLock;

use tch::{Device, Kind, Tensor};

use crate::native::{Autocast, cuda_native_bf16};

/// The float type of a forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Everything in float32.
    Float32,
    /// Autocast to bfloat16.
    BFloat16,
    /// Autocast to float16.
    Float16,
}

impl Precision {
    /// The precision of forward passes on `device`, mixed when `mixed` is asked (module doc).
    pub fn on(device: Device, mixed: bool) -> Precision {
        if !mixed {
            return Precision::Float32;
        }
        if mixed_precision_env() == Some(Asked::Float16)
            && (device.is_cuda() || device == Device::Cpu)
        {
            return Precision::Float16;
        }
        match device {
            Device::Cuda(_) if cuda_native_bf16() => Precision::BFloat16,
            Device::Cuda(_) => Precision::Float16,
            Device::Cpu if cpu_native_bf16() => Precision::BFloat16,
            _ => Precision::Float32,
        }
    }

    /// Whether mixed precision is on by default on `device`: as [`MIXED_PRECISION_ENV`] says
    /// when it is set, else where it is bfloat16 on CUDA.
    pub fn mixed_by_default(device: Device) -> bool {
        match mixed_precision_env() {
            Some(Asked::Off) => false,
            Some(Asked::On | Asked::Float16) => true,
            None => device.is_cuda() && Precision::on(device, true) == Precision::BFloat16,
        }
    }

    /// The reduced type autocast casts to (`None` for float32).
    pub fn autocast_kind(self) -> Option<Kind> {
        match self {
            Precision::Float32 => None,
            Precision::BFloat16 => Some(Kind::BFloat16),
            Precision::Float16 => Some(Kind::Half),
        }
    }

    /// Its name in reports: `float32`, `bfloat16`, `float16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Float32 => "float32",
            Precision::BFloat16 => "bfloat16",
            Precision::Float16 => "float16",
        }
    }

    /// `forward()` on `device` in this precision, its output in float32. Should libtorch refuse
    /// the autocast region (it does not for the CPU and CUDA), the pass runs in float32.
    pub fn forward(self, device: Device, forward: impl FnOnce() -> Tensor) -> Tensor {
        let autocast = self
            .autocast_kind()
            .and_then(|kind| Autocast::enter(device, kind).ok());
        match autocast {
            Some(_autocast) => forward().to_kind(Kind::Float),
            None => forward(),
        }
    }
}

/// The environment variable that sets the default of `Budget::mixed_precision` for every
/// device: `on` or `off` (the trainer's tests measure quality both ways with it), or `float16`:
/// on, in float16 with loss scaling on any CUDA device or CPU, whatever bfloat16 they have (how
/// the float16 path of older GPUs is tested on a newer one, or on the CPU). Unset, the default
/// is bfloat16 on CUDA devices that have it. Read once per process.
pub const MIXED_PRECISION_ENV: &str = "EASEML_MIXED_PRECISION";

/// What [`MIXED_PRECISION_ENV`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Off,
    On,
    Float16,
}

/// [`MIXED_PRECISION_ENV`]'s answer, `None` when unset; another value is said once on stderr
/// and counts as unset. Read once (every forward pass asks).
fn mixed_precision_env() -> Option<Asked> {
    static ASKED: OnceLock<Option<Asked>> = OnceLock::new();
    *ASKED.get_or_init(|| {
        let value = std::env::var(MIXED_PRECISION_ENV).ok()?;
        match parse_switch(&value) {
            Ok(asked) => asked,
            Err(message) => {
                eprintln!("easeml: {message}");
                None
            }
        }
    })
}

/// `on` / `off` / `float16` (any case, surrounding blanks ignored; empty is unset), or what is
/// wrong.
fn parse_switch(value: &str) -> Result<Option<Asked>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "on" => Ok(Some(Asked::On)),
        "off" => Ok(Some(Asked::Off)),
        "float16" => Ok(Some(Asked::Float16)),
        _ => Err(format!(
            "{MIXED_PRECISION_ENV}={value:?} is none of `on`, `off` and `float16`; the default \
             (bfloat16 on CUDA devices that have it) applies. Set it to `on`, `off` or `float16`, \
             or unset it."
        )),
    }
}

/// Whether this CPU has bfloat16 arithmetic (`avx512_bf16` or `amx_bf16` among the flags of
/// `/proc/cpuinfo`; false where that file is absent). Read once.
pub fn cpu_native_bf16() -> bool {
    static NATIVE: OnceLock<bool> = OnceLock::new();
    *NATIVE.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo")
            .map(|info| cpuinfo_has_bf16(&info))
            .unwrap_or(false)
    })
}

/// Whether a `/proc/cpuinfo` text lists a bfloat16 instruction set among its `flags`.
fn cpuinfo_has_bf16(info: &str) -> bool {
    info.lines()
        .filter(|line| line.starts_with("flags"))
        .flat_map(|line| line.split_whitespace())
        .any(|flag| flag == "avx512_bf16" || flag == "amx_bf16")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_flags_are_read_off_cpuinfo() {
        assert!(cpuinfo_has_bf16(
            "processor : 0\nflags : fpu sse avx512f avx512_bf16 avx2\n"
        ));
        assert!(cpuinfo_has_bf16("flags\t\t: fpu amx_tile amx_bf16\n"));
        assert!(!cpuinfo_has_bf16(
            "flags : fpu avx512f avx2\nbugs : avx512_bf16\n"
        ));
        assert!(!cpuinfo_has_bf16(""));
    }

    #[test]
    fn the_switch_is_on_or_off_and_says_what_else_is_wrong() {
        assert_eq!(parse_switch(" ON "), Ok(Some(Asked::On)));
        assert_eq!(parse_switch("off"), Ok(Some(Asked::Off)));
        assert_eq!(parse_switch("Float16"), Ok(Some(Asked::Float16)));
        assert_eq!(parse_switch(""), Ok(None));
        let message = parse_switch("bf16").unwrap_err();
        assert!(
            message.contains("EASEML_MIXED_PRECISION=\"bf16\""),
            "{message}"
        );
        assert!(message.contains("`on`, `off` or `float16`"), "{message}");
    }

    #[test]
    fn float32_unless_asked_and_the_cpu_follows_its_flags() {
        assert_eq!(Precision::on(Device::Cpu, false), Precision::Float32);
        let expected = if mixed_precision_env() == Some(Asked::Float16) {
            Precision::Float16
        } else if cpu_native_bf16() {
            Precision::BFloat16
        } else {
            Precision::Float32
        };
        assert_eq!(Precision::on(Device::Cpu, true), expected);
        if std::env::var_os(MIXED_PRECISION_ENV).is_none() {
            assert!(!Precision::mixed_by_default(Device::Cpu));
        }
    }

    #[test]
    fn a_mixed_forward_computes_reduced_and_answers_float32() {
        let a = Tensor::ones([8, 8], (Kind::Float, Device::Cpu)) / 3.0;
        let full = Precision::Float32.forward(Device::Cpu, || a.matmul(&a));
        let reduced = Precision::BFloat16.forward(Device::Cpu, || a.matmul(&a));
        assert_eq!(reduced.kind(), Kind::Float);
        let difference = (&full - &reduced).abs().max().double_value(&[]);
        // 8 * (1/3)^2 = 0.888..; bfloat16 keeps 8 bits of it.
        assert!(difference > 0.0 && difference < 0.01, "{difference}");
        // float16 (11 bits) autocasts on the CPU too (`EASEML_MIXED_PRECISION=float16`).
        let half = Precision::Float16.forward(Device::Cpu, || a.matmul(&a));
        assert_eq!(half.kind(), Kind::Float);
        let half_difference = (full - &half).abs().max().double_value(&[]);
        assert!(
            half_difference > 0.0 && half_difference < difference,
            "{half_difference} vs bfloat16's {difference}"
        );
        assert_eq!(
            a.matmul(&a).kind(),
            Kind::Float,
            "autocast ends with the pass"
        );
    }
}
