//! `extern ... __kconfig` variables: one read-only `.kconfig` ARRAY map
//! holding their values, as libbpf builds it.
//!
//! clang lists the externs in a `.kconfig` DATASEC (all at offset 0: they
//! have no storage in the object); libbpf gives each a place in one frozen,
//! read-only map and points every `lddw` of the variable at it. bpfjet knows
//! the values libbpf computes itself rather than reading from the kernel
//! configuration: `LINUX_KERNEL_VERSION` (from `uname`),
//! `LINUX_HAS_BPF_COOKIE` (true: bpfjet's tracing runs provide
//! `bpf_get_attach_cookie`; libbpf's usdt.bpf.h reads it) and
//! `LINUX_HAS_SYSCALL_WRAPPER` (libbpf's probe: a kprobe could be placed on
//! `__x64_sys_bpf`). `CONFIG_*` options
//! (libbpf reads /proc/config.gz) are refused with their name.

use std::collections::HashMap;

use bpfjet_maps::spec::flags;
use bpfjet_maps::{MapSpec, MapType};

use crate::btf::{Btf, BtfType};
use crate::error::ObjError;

pub(crate) const SECTION: &str = ".kconfig";

/// The `.kconfig` map and where each variable lives in its value.
pub(crate) struct Kconfig {
    pub spec: MapSpec,
    pub offsets: HashMap<String, u32>,
}

/// `KERNEL_VERSION(a, b, c)` of the running kernel's release (`uname -r`).
fn kernel_version() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| parse_release(r.trim()))
        .unwrap_or(0)
}

fn parse_release(release: &str) -> u64 {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (a, b, c) = (next(), next(), next());
    // The kernel's KERNEL_VERSION saturates the sublevel at 255.
    (a << 16) + (b << 8) + c.min(255)
}

/// libbpf's `FEAT_SYSCALL_WRAPPER` probe: can a kprobe be placed on the
/// x86-64 system-call wrapper `__x64_sys_bpf`? libbpf opens one (through
/// the kprobe PMU, else tracefs `kprobe_events`); without kprobe support it
/// answers false even though the wrapper exists. The same conditions,
/// checked without creating a probe.
pub fn has_syscall_wrapper() -> bool {
    let kprobes = ["/sys/bus/event_source/devices/kprobe/type"]
        .iter()
        .chain(&[
            "/sys/kernel/tracing/kprobe_events",
            "/sys/kernel/debug/tracing/kprobe_events",
        ])
        .any(|p| std::path::Path::new(p).exists());
    kprobes
        && std::fs::read_to_string("/proc/kallsyms").is_ok_and(|k| {
            k.lines()
                .any(|l| l.split_whitespace().nth(2) == Some("__x64_sys_bpf"))
        })
}

fn value_of(name: &str) -> Option<u64> {
    match name {
        "LINUX_KERNEL_VERSION" => Some(kernel_version()),
        // bpfjet's tracing runs give every probe its attach cookie.
        "LINUX_HAS_BPF_COOKIE" => Some(1),
        "LINUX_HAS_SYSCALL_WRAPPER" => Some(has_syscall_wrapper() as u64),
        _ => None,
    }
}

/// The map for the object's `__kconfig` externs, if it has any.
pub(crate) fn collect(btf: Option<&Btf>) -> Result<Option<Kconfig>, ObjError> {
    let Some(btf) = btf else { return Ok(None) };
    let Some(vars) = btf.datasec(SECTION) else {
        return Ok(None);
    };
    let mut offsets = HashMap::new();
    let mut image: Vec<u8> = Vec::new();
    for v in vars {
        let Some(BtfType::Var { name, target, .. }) = btf.type_by_id(v.type_id) else {
            continue;
        };
        let size = btf.size_of(*target).unwrap_or(0);
        if !matches!(size, 1 | 2 | 4 | 8) {
            return Err(ObjError::UnsupportedExtern {
                name: name.clone(),
                what: "__kconfig variable that is not a 1, 2, 4 or 8-byte integer",
            });
        }
        let value = value_of(name).ok_or_else(|| ObjError::UnsupportedExtern {
            name: name.clone(),
            what: "__kconfig variable (bpfjet knows LINUX_KERNEL_VERSION, \
                   LINUX_HAS_BPF_COOKIE and LINUX_HAS_SYSCALL_WRAPPER, not CONFIG_* options)",
        })?;
        let at = image.len().next_multiple_of(size as usize);
        image.resize(at, 0);
        image.extend_from_slice(&value.to_le_bytes()[..size as usize]);
        offsets.insert(name.clone(), at as u32);
    }
    if offsets.is_empty() {
        return Ok(None);
    }
    let image_len = image.len().next_multiple_of(8);
    image.resize(image_len, 0);
    let mut spec = MapSpec::new(SECTION, MapType::Array, 4, image.len() as u32, 1);
    spec.flags = flags::MMAPABLE | flags::RDONLY_PROG;
    spec.frozen = true;
    spec.initial_data = Some(image);
    Ok(Some(Kconfig { spec, offsets }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn release_strings() {
        assert_eq!(
            super::parse_release("6.18.0-1-amd64"),
            (6 << 16) + (18 << 8)
        );
        assert_eq!(
            super::parse_release("5.10.300"),
            (5 << 16) + (10 << 8) + 255
        );
    }
}
