//! `extern ... __kconfig` variables: one read-only `.kconfig` ARRAY map
//! holding their values, built as libbpf builds it.
//!
//! clang lists the externs in a `.kconfig` DATASEC (all at offset 0: they
//! have no storage in the object); libbpf gives each a place in one frozen,
//! read-only map and points every `lddw` of the variable at it. The rules
//! are libbpf's, so an object loads (or is refused) as under libbpf:
//! - types: `_Bool`, `char`, 1/2/4/8-byte integers, `enum libbpf_tristate`
//!   and `char` arrays; anything else is refused;
//! - layout: the externs sorted by alignment (largest first), then size
//!   (smallest first), then name, each at the next offset of its alignment;
//!   the map's value ends with the last one;
//! - `CONFIG_*` options come from the running kernel's configuration
//!   (`/boot/config-$(uname -r)`, plain or gzip, else `/proc/config.gz`),
//!   read only when the object has one: `y`/`n`/`m` set a bool, a tristate
//!   or a char, `"..."` a char array (truncated to fit, NUL-terminated), a
//!   number (C `strtoull` base 0) an integer or char that must hold it;
//! - libbpf's virtual externs: `LINUX_KERNEL_VERSION` (from `uname`),
//!   `LINUX_HAS_BPF_COOKIE` (true: bpfjet's tracing runs provide
//!   `bpf_get_attach_cookie`) and `LINUX_HAS_SYSCALL_WRAPPER` (libbpf's
//!   probe); another `LINUX_*` only if `__weak`; any other name is refused;
//! - a `__weak` extern nothing sets is 0; a strong one refuses the object.

use std::collections::HashMap;
use std::io::Read;

use bpfjet_maps::spec::flags;
use bpfjet_maps::{MapSpec, MapType};

use crate::btf::{Btf, BtfType};
use crate::elf::Elf;
use crate::error::ObjError;

pub(crate) const SECTION: &str = ".kconfig";

/// The `.kconfig` map and where each variable lives in its value.
pub(crate) struct Kconfig {
    pub spec: MapSpec,
    pub offsets: HashMap<String, u32>,
}

/// How libbpf reads an extern's configuration value (its `kcfg_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Char,
    Int { signed: bool },
    Tristate,
    CharArray,
}

/// `enum libbpf_tristate`.
const TRI_NO: u64 = 0;
const TRI_YES: u64 = 1;
const TRI_MODULE: u64 = 2;

struct Extern {
    name: String,
    kind: Kind,
    size: u32,
    align: u32,
    weak: bool,
    offset: u32,
    set: bool,
}

fn error(name: &str, reason: impl Into<String>) -> ObjError {
    ObjError::Kconfig {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// libbpf's `find_kcfg_type`, with the size and alignment of the type.
fn kind_of(btf: &Btf, type_id: u32) -> Option<(Kind, u32, u32)> {
    let id = btf.resolve(type_id)?;
    match btf.type_by_id(id)? {
        BtfType::Int { size, encoding, .. } => {
            const SIGNED: u32 = 1;
            const BOOL: u32 = 4;
            let enc = (encoding >> 24) & 0xf;
            let kind = if enc & BOOL != 0 {
                (*size == 1).then_some(Kind::Bool)?
            } else if *size == 1 {
                Kind::Char
            } else if matches!(size, 2 | 4 | 8) {
                Kind::Int {
                    signed: enc & SIGNED != 0,
                }
            } else {
                return None;
            };
            Some((kind, *size, (*size).min(8)))
        }
        BtfType::Enum { name, size, .. } if name == "libbpf_tristate" && matches!(size, 4 | 8) => {
            Some((Kind::Tristate, *size, (*size).min(8)))
        }
        BtfType::Array { elem, nelems, .. } if *nelems > 0 => {
            let (elem, ..) = kind_of(btf, *elem)?;
            (elem == Kind::Char).then_some((Kind::CharArray, *nelems, 1))
        }
        _ => None,
    }
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

/// libbpf's virtual externs it computes itself.
fn virtual_value(name: &str) -> Option<u64> {
    match name {
        "LINUX_KERNEL_VERSION" => Some(kernel_version()),
        // bpfjet's tracing runs give every probe its attach cookie.
        "LINUX_HAS_BPF_COOKIE" => Some(1),
        "LINUX_HAS_SYSCALL_WRAPPER" => Some(has_syscall_wrapper() as u64),
        _ => None,
    }
}

/// The running kernel's configuration as libbpf finds it, and where.
fn system_kconfig() -> Result<(String, String), String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_string())
        .unwrap_or_default();
    let candidates = [format!("/boot/config-{release}"), "/proc/config.gz".into()];
    for path in &candidates {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        // Like gzopen: a gzip stream, or the file as it is.
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut text = String::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .map_err(|e| format!("{path}: {e}"))?;
            text
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        return Ok((path.clone(), text));
    }
    Err(format!(
        "cannot open {} nor {}",
        candidates[0], candidates[1]
    ))
}

/// C's `strtoull(s, &end, 0)` consuming all of `s`: decimal, `0x` hex,
/// `0` octal, an optional sign (a `-` negates modulo 2^64).
fn parse_u64(s: &str) -> Option<u64> {
    let t = s.trim_start();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let v = u64::from_str_radix(digits, radix).ok()?;
    Some(if negative { v.wrapping_neg() } else { v })
}

impl Extern {
    /// libbpf's range rule: the value must survive a store in `size`
    /// bytes (for a signed type, as the sign-extended number it is).
    fn fits(&self, v: u64) -> bool {
        let bits = self.size * 8;
        if bits >= 64 {
            return true;
        }
        if matches!(self.kind, Kind::Int { signed: true }) {
            v.wrapping_add(1 << (bits - 1)) < (1 << bits)
        } else {
            v >> bits == 0
        }
    }

    fn store(&mut self, image: &mut [u8], bytes: &[u8]) {
        let at = self.offset as usize;
        image[at..at + bytes.len()].copy_from_slice(bytes);
        self.set = true;
    }

    /// libbpf's `set_kcfg_value_num`.
    fn set_number(&mut self, image: &mut [u8], v: u64) -> Result<(), ObjError> {
        if !matches!(self.kind, Kind::Int { .. } | Kind::Char | Kind::Bool) {
            return Err(error(
                &self.name,
                format!("the number {v} needs an integer, char or bool extern"),
            ));
        }
        if self.kind == Kind::Bool && v > 1 {
            return Err(error(
                &self.name,
                format!("the number {v} does not fit a bool (0 or 1)"),
            ));
        }
        if !self.fits(v) {
            return Err(error(
                &self.name,
                format!("the number {v} does not fit in its {} bytes", self.size),
            ));
        }
        let size = self.size as usize;
        self.store(image, &v.to_le_bytes()[..size]);
        Ok(())
    }

    /// A configuration line's value for this extern, as libbpf's
    /// `bpf_object__process_kconfig_line` reads it.
    fn set_from_config(&mut self, image: &mut [u8], value: &str) -> Result<(), ObjError> {
        match value.as_bytes()[0] {
            c @ (b'y' | b'n' | b'm') => match self.kind {
                Kind::Bool if c == b'm' => Err(error(
                    &self.name,
                    "the value m (module) needs an enum libbpf_tristate or a char, not a bool",
                )),
                Kind::Bool => {
                    self.store(image, &[(c == b'y') as u8]);
                    Ok(())
                }
                Kind::Tristate => {
                    let t = match c {
                        b'y' => TRI_YES,
                        b'm' => TRI_MODULE,
                        _ => TRI_NO,
                    };
                    self.store(image, &(t as u32).to_le_bytes());
                    Ok(())
                }
                Kind::Char => {
                    self.store(image, &[c]);
                    Ok(())
                }
                _ => Err(error(
                    &self.name,
                    format!(
                        "the value {} needs a bool, an enum libbpf_tristate or a char",
                        c as char
                    ),
                )),
            },
            b'"' => {
                if self.kind != Kind::CharArray {
                    return Err(error(
                        &self.name,
                        format!("the string {value} needs a char array extern"),
                    ));
                }
                if value.len() < 2 || !value.ends_with('"') {
                    return Err(error(
                        &self.name,
                        format!("the string {value} is not closed"),
                    ));
                }
                let text = &value.as_bytes()[1..value.len() - 1];
                let mut bytes = text[..text.len().min(self.size as usize - 1)].to_vec();
                bytes.push(0);
                self.store(image, &bytes);
                Ok(())
            }
            _ => {
                let v = parse_u64(value).ok_or_else(|| {
                    error(
                        &self.name,
                        format!("{value} is neither y, n, m, a quoted string nor a number"),
                    )
                })?;
                if !matches!(self.kind, Kind::Int { .. } | Kind::Char) {
                    return Err(error(
                        &self.name,
                        format!("the number {value} needs an integer or char extern"),
                    ));
                }
                self.set_number(image, v)
            }
        }
    }
}

/// Every `CONFIG_NAME=VALUE` line of `config` that names an extern not yet
/// set sets it; a `CONFIG_` line without `=` or without a value is an
/// error, as in libbpf.
fn apply_config(
    externs: &mut [Extern],
    image: &mut [u8],
    config: &str,
    path: &str,
) -> Result<(), ObjError> {
    for line in config.lines() {
        if !line.starts_with("CONFIG_") {
            continue;
        }
        let bad = |why: &str| ObjError::KconfigFile {
            path: path.to_string(),
            reason: format!("line '{line}': {why}"),
        };
        let (name, value) = line.split_once('=').ok_or_else(|| bad("no separator"))?;
        if value.is_empty() {
            return Err(bad("no value"));
        }
        if let Some(e) = externs.iter_mut().find(|e| e.name == name && !e.set) {
            e.set_from_config(image, value)?;
        }
    }
    Ok(())
}

/// The map for the object's `__kconfig` externs, if it has any.
pub(crate) fn collect(elf: &Elf, btf: Option<&Btf>) -> Result<Option<Kconfig>, ObjError> {
    let Some(btf) = btf else { return Ok(None) };
    let Some(vars) = btf.datasec(SECTION) else {
        return Ok(None);
    };
    let mut externs = Vec::new();
    for v in vars {
        let Some(BtfType::Var { name, target, .. }) = btf.type_by_id(v.type_id) else {
            continue;
        };
        let (kind, size, align) = kind_of(btf, *target).ok_or_else(|| {
            error(
                name,
                "its type cannot hold a configuration value (libbpf takes _Bool, char, \
                 2/4/8-byte integers, enum libbpf_tristate and char arrays)",
            )
        })?;
        let weak = elf
            .symbols
            .iter()
            .any(|s| s.section.is_none() && s.name == *name && s.weak);
        externs.push(Extern {
            name: name.clone(),
            kind,
            size,
            align,
            weak,
            offset: 0,
            set: false,
        });
    }
    if externs.is_empty() {
        return Ok(None);
    }
    externs.sort_by(|a, b| {
        b.align
            .cmp(&a.align)
            .then(a.size.cmp(&b.size))
            .then(a.name.cmp(&b.name))
    });
    let mut end = 0u32;
    for e in &mut externs {
        e.offset = end.next_multiple_of(e.align);
        end = e.offset + e.size;
    }
    let mut image = vec![0u8; end as usize];
    let mut need_config = false;
    for e in &mut externs {
        if e.name.starts_with("CONFIG_") {
            need_config = true;
        } else if let Some(v) = virtual_value(&e.name) {
            e.set_number(&mut image, v)?;
        } else if !e.name.starts_with("LINUX_") || !e.weak {
            return Err(error(
                &e.name,
                "not a virtual extern libbpf knows (it sets LINUX_KERNEL_VERSION, \
                 LINUX_HAS_BPF_COOKIE and LINUX_HAS_SYSCALL_WRAPPER, other LINUX_* names \
                 only when __weak, to 0; kernel options are named CONFIG_*)",
            ));
        }
    }
    let mut source = String::new();
    if need_config {
        let (path, text) = system_kconfig().map_err(|reason| ObjError::KconfigFile {
            path: "the kernel configuration".into(),
            reason,
        })?;
        apply_config(&mut externs, &mut image, &text, &path)?;
        source = path;
    }
    if let Some(e) = externs.iter().find(|e| !e.set && !e.weak) {
        return Err(error(
            &e.name,
            if source.is_empty() {
                "not set and not __weak".to_string()
            } else {
                format!("not set in the kernel configuration ({source}) and not __weak")
            },
        ));
    }
    let offsets = externs.iter().map(|e| (e.name.clone(), e.offset)).collect();
    let mut spec = MapSpec::new(SECTION, MapType::Array, 4, end, 1);
    spec.flags = flags::MMAPABLE | flags::RDONLY_PROG;
    spec.frozen = true;
    spec.initial_data = Some(image);
    Ok(Some(Kconfig { spec, offsets }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings() {
        assert_eq!(parse_release("6.18.0-1-amd64"), (6 << 16) + (18 << 8));
        assert_eq!(parse_release("5.10.300"), (5 << 16) + (10 << 8) + 255);
    }

    #[test]
    fn numbers_as_strtoull_base_0_reads_them() {
        assert_eq!(parse_u64("250"), Some(250));
        assert_eq!(parse_u64("0x1f"), Some(31));
        assert_eq!(parse_u64("010"), Some(8));
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("-1"), Some(u64::MAX));
        assert_eq!(parse_u64("12abc"), None);
        assert_eq!(parse_u64("08"), None);
    }

    fn ext(name: &str, kind: Kind, size: u32, offset: u32) -> Extern {
        Extern {
            name: name.into(),
            kind,
            size,
            align: size.min(8),
            weak: true,
            offset,
            set: false,
        }
    }

    #[test]
    fn configuration_lines_set_each_kind() {
        let mut externs = vec![
            ext("CONFIG_A", Kind::Bool, 1, 0),
            ext("CONFIG_B", Kind::Tristate, 4, 4),
            ext("CONFIG_C", Kind::Char, 1, 1),
            ext("CONFIG_D", Kind::Int { signed: true }, 2, 2),
            ext("CONFIG_E", Kind::CharArray, 4, 8),
        ];
        let mut image = vec![0u8; 12];
        let config = "# CONFIG_X is not set\nCONFIG_A=y\nCONFIG_B=m\nCONFIG_C=n\n\
                      CONFIG_D=-2\nCONFIG_E=\"hello\"\nCONFIG_A=n\nCONFIG_OTHER=7\n";
        apply_config(&mut externs, &mut image, config, "test").unwrap();
        assert_eq!(
            image,
            [1, b'n', 0xfe, 0xff, 2, 0, 0, 0, b'h', b'e', b'l', 0]
        );
        assert!(externs.iter().all(|e| e.set));
    }

    #[test]
    fn configuration_values_of_the_wrong_kind_are_refused() {
        for (kind, size, value) in [
            (Kind::Bool, 1, "m"),
            (Kind::Bool, 1, "2"),
            (Kind::Int { signed: false }, 4, "y"),
            (Kind::Int { signed: false }, 1 << 1, "70000"),
            (Kind::Int { signed: true }, 1 << 1, "40000"),
            (Kind::Char, 1, "\"s\""),
            (Kind::CharArray, 4, "7"),
            (Kind::CharArray, 4, "\"open"),
            (Kind::Tristate, 4, "12"),
        ] {
            let mut e = vec![ext("CONFIG_V", kind, size, 0)];
            let mut image = vec![0u8; 8];
            let line = format!("CONFIG_V={value}");
            assert!(
                apply_config(&mut e, &mut image, &line, "test").is_err(),
                "{kind:?} {value}"
            );
        }
        let mut e = vec![ext("CONFIG_V", Kind::Bool, 1, 0)];
        assert!(apply_config(&mut e, &mut [0], "CONFIG_V", "test").is_err());
        assert!(apply_config(&mut e, &mut [0], "CONFIG_V=", "test").is_err());
    }
}
