//! USDT probes (`<sys/sdt.h>`, `DTRACE_PROBE*`/`STAP_PROBE*`) as libbpf
//! attaches them.
//!
//! Each probe of a file is an `NT_STAPSDT` note in `.note.stapsdt`: the
//! address of a `nop` the macro placed in the code, the link-time address
//! of `.stapsdt.base` (to correct for prelinking), the address of the
//! probe's semaphore (0: none), provider, name and one argument spec per
//! argument (`-4@%edi`, `8@-16(%rbp)`, `4@$5`). Attaching patches the
//! `nop` — which is in the middle of a function, so a jump patch checks
//! the whole function for branches into the patched bytes and keeps the red
//! zone intact ([`crate::uprobe::attach_mid_function`]), and where a branch
//! lands right after the `nop` (a semaphore-guarded probe) the `nop` becomes
//! an `int3` ([`crate::breakpoint`]) — and increments
//! the semaphore, which programs test before computing their arguments.
//!
//! The arguments reach a program the way libbpf's `usdt.bpf.h` reads them:
//! a spec per distinct argument string in the `__bpf_usdt_specs` ARRAY (the
//! layout of `struct __bpf_usdt_spec`, [`UsdtSpec::encode`]), its id as
//! the attach cookie (`bpf_get_attach_cookie`) and in
//! `__bpf_usdt_ip_to_spec_id` under the probe's address. The argument
//! parser accepts exactly libbpf's x86-64 forms.

use crate::breakpoint::{self, Breakpoint};
use crate::symbols::{resolve_path, LoadedObject, ResolvedSymbol};
use crate::uprobe::{attach_mid_function, Attachment, ProbeHandler};
use crate::ProbeError;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

/// libbpf's `BPF_USDT_MAX_ARG_CNT`.
pub const MAX_ARGS: usize = 12;
/// `sizeof(struct __bpf_usdt_spec)`: 12 × 16-byte argument specs, the
/// cookie (u64), the argument count (short), padded to 8.
pub const SPEC_SIZE: usize = 208;

/// One `NT_STAPSDT` note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtNote {
    pub provider: String,
    pub name: String,
    /// ELF virtual address of the probe's `nop` (prelink-corrected).
    pub pc: u64,
    /// ELF virtual address of the semaphore (0: none).
    pub semaphore: u64,
    pub args: String,
}

fn elf_error(path: &Path, reason: impl ToString) -> ProbeError {
    ProbeError::Elf {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

const NT_STAPSDT: u32 = 3;

/// Every USDT note of the ELF file at `path`.
pub fn read_notes(path: &Path) -> Result<Vec<UsdtNote>, ProbeError> {
    let data = std::fs::read(path).map_err(|e| elf_error(path, e))?;
    let file = object::File::parse(&*data).map_err(|e| elf_error(path, e))?;
    let Some(notes) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let base_actual = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let bytes = notes.data().map_err(|e| elf_error(path, e))?;
    parse_notes(bytes, base_actual).map_err(|e| elf_error(path, format!(".note.stapsdt: {e}")))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn parse_notes(bytes: &[u8], base_actual: Option<u64>) -> Result<Vec<UsdtNote>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let truncated = || format!("note at offset {at} is truncated");
        let namesz = u32_at(bytes, at).ok_or_else(truncated)? as usize;
        let descsz = u32_at(bytes, at + 4).ok_or_else(truncated)? as usize;
        let ty = u32_at(bytes, at + 8).ok_or_else(truncated)?;
        let name_at = at + 12;
        let desc_at = name_at + namesz.next_multiple_of(4);
        let next = desc_at + descsz.next_multiple_of(4);
        if next > bytes.len() {
            return Err(truncated());
        }
        let owner = &bytes[name_at..name_at + namesz];
        if ty == NT_STAPSDT && owner == b"stapsdt\0" {
            let desc = &bytes[desc_at..desc_at + descsz];
            let pc = u64_at(desc, 0).ok_or_else(truncated)?;
            let base = u64_at(desc, 8).ok_or_else(truncated)?;
            let semaphore = u64_at(desc, 16).ok_or_else(truncated)?;
            let mut strings = desc.get(24..).unwrap_or_default().split(|&b| b == 0);
            let mut next_str = |what: &str| {
                strings
                    .next()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .ok_or_else(|| format!("note at offset {at} has no {what}"))
            };
            let provider = next_str("provider")?;
            let name = next_str("name")?;
            let args = next_str("argument string").unwrap_or_default();
            // Prelinking moves the code; .stapsdt.base moves with it.
            let pc = match base_actual {
                Some(actual) if base != 0 => pc.wrapping_add(actual).wrapping_sub(base),
                _ => pc,
            };
            out.push(UsdtNote {
                provider,
                name,
                pc,
                semaphore,
                args,
            });
        }
        at = next;
    }
    Ok(out)
}

/// Where an argument lives (`enum __bpf_usdt_arg_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// `$N`: the constant `val_off`.
    Const = 0,
    /// `%reg`: the register at `reg_off` of `pt_regs`.
    Reg = 1,
    /// `OFF(%reg)`: memory at register + `val_off`.
    RegDeref = 2,
}

/// `struct __bpf_usdt_arg_spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsdtArg {
    pub kind: ArgKind,
    pub val_off: u64,
    pub reg_off: i16,
    pub signed: bool,
    /// 64 − 8 × size: the bits cleared (and sign-extended back when signed).
    pub bitshift: i8,
}

/// Offset in the x86-64 `pt_regs` of a register named as in AT&T syntax
/// (any width: `rax`, `eax`, `ax`, `al`), as libbpf's table.
fn pt_regs_offset(reg: &str) -> Option<i16> {
    const REGS: &[(&[&str], i16)] = &[
        (&["r15", "r15d", "r15w", "r15b"], 0),
        (&["r14", "r14d", "r14w", "r14b"], 8),
        (&["r13", "r13d", "r13w", "r13b"], 16),
        (&["r12", "r12d", "r12w", "r12b"], 24),
        (&["rbp", "ebp", "bp", "bpl"], 32),
        (&["rbx", "ebx", "bx", "bl"], 40),
        (&["r11", "r11d", "r11w", "r11b"], 48),
        (&["r10", "r10d", "r10w", "r10b"], 56),
        (&["r9", "r9d", "r9w", "r9b"], 64),
        (&["r8", "r8d", "r8w", "r8b"], 72),
        (&["rax", "eax", "ax", "al"], 80),
        (&["rcx", "ecx", "cx", "cl"], 88),
        (&["rdx", "edx", "dx", "dl"], 96),
        (&["rsi", "esi", "si", "sil"], 104),
        (&["rdi", "edi", "di", "dil"], 112),
        (&["rip", "eip", "ip"], 128),
        (&["rsp", "esp", "sp", "spl"], 152),
    ];
    REGS.iter()
        .find(|(names, _)| names.contains(&reg))
        .map(|&(_, off)| off)
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = digits.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else {
        digits.parse::<i64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn register(s: &str) -> Result<i16, String> {
    let name = s
        .strip_prefix('%')
        .ok_or_else(|| format!("{s:?} is not a register"))?;
    pt_regs_offset(name).ok_or_else(|| format!("unknown register %{name}"))
}

/// One argument spec, `SIZE@LOCATION`.
pub fn parse_arg(spec: &str) -> Result<UsdtArg, String> {
    let bad = |why: &str| format!("argument {spec:?}: {why}");
    let (size, loc) = spec
        .split_once('@')
        .ok_or_else(|| bad("expected SIZE@LOCATION"))?;
    let size = parse_int(size.trim()).ok_or_else(|| bad("bad size"))?;
    let loc = loc.trim();
    let (kind, val_off, reg_off) = if let Some(c) = loc.strip_prefix('$') {
        let v = parse_int(c).ok_or_else(|| bad("constant is not an integer"))?;
        (ArgKind::Const, v as u64, 0)
    } else if let Some(open) = loc.find('(') {
        let inner = loc[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| bad("unbalanced parenthesis"))?;
        if inner.contains(',') {
            // libbpf 1.1's usdt.bpf.h has no scaled-index form.
            return Err(bad(
                "base+index*scale addressing is not supported by usdt.bpf.h",
            ));
        }
        let off = match loc[..open].trim() {
            "" => 0,
            o => parse_int(o).ok_or_else(|| {
                bad("the offset is not an integer (symbolic, e.g. a global variable)")
            })?,
        };
        (
            ArgKind::RegDeref,
            off as u64,
            register(inner.trim()).map_err(|e| bad(&e))?,
        )
    } else {
        (ArgKind::Reg, 0, register(loc).map_err(|e| bad(&e))?)
    };
    let bytes = size.unsigned_abs();
    if !matches!(bytes, 1 | 2 | 4 | 8) {
        return Err(bad("size is not 1, 2, 4 or 8"));
    }
    Ok(UsdtArg {
        kind,
        val_off,
        reg_off,
        signed: size < 0,
        bitshift: (64 - 8 * bytes) as i8,
    })
}

/// Every argument of a note's argument string (space separated).
pub fn parse_args(args: &str) -> Result<Vec<UsdtArg>, String> {
    let v: Vec<UsdtArg> = args
        .split_whitespace()
        .map(parse_arg)
        .collect::<Result<_, _>>()?;
    if v.len() > MAX_ARGS {
        return Err(format!(
            "{} arguments, usdt.bpf.h reads at most {MAX_ARGS}",
            v.len()
        ));
    }
    Ok(v)
}

/// `struct __bpf_usdt_spec`: the arguments and the user's cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtSpec {
    pub args: Vec<UsdtArg>,
    pub cookie: u64,
}

impl UsdtSpec {
    /// The spec in the layout of libbpf's usdt.bpf.h (x86-64).
    pub fn encode(&self) -> [u8; SPEC_SIZE] {
        let mut b = [0u8; SPEC_SIZE];
        for (i, a) in self.args.iter().enumerate() {
            let at = i * 16;
            b[at..at + 8].copy_from_slice(&a.val_off.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&(a.kind as u32).to_le_bytes());
            b[at + 12..at + 14].copy_from_slice(&a.reg_off.to_le_bytes());
            b[at + 14] = a.signed as u8;
            b[at + 15] = a.bitshift as u8;
        }
        b[192..200].copy_from_slice(&self.cookie.to_le_bytes());
        b[200..202].copy_from_slice(&(self.args.len() as i16).to_le_bytes());
        b
    }
}

/// A USDT probe found in this process.
#[derive(Debug, Clone)]
pub struct UsdtSite {
    pub path: PathBuf,
    pub note: UsdtNote,
    pub args: Vec<UsdtArg>,
    /// Run-time address of the `nop`.
    pub address: u64,
    /// Run-time address of the semaphore (0: none).
    pub semaphore: u64,
    /// The function holding the probe: run-time start and size.
    pub function: (u64, u64),
    pub function_name: String,
}

/// The function symbol of `file` covering `vaddr`: (name, start, size).
fn containing_function(file: &object::File, vaddr: u64) -> Option<(String, u64, u64)> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.size() > 0)
        .find(|s| s.address() <= vaddr && vaddr < s.address() + s.size())
        .map(|s| (s.name().unwrap_or("?").to_string(), s.address(), s.size()))
}

/// Every probe PROVIDER:NAME of the object `path` (a path or a bare
/// library name, as for uprobes) loaded in this process.
pub fn resolve(
    path: &str,
    provider: &str,
    name: &str,
    objects: &[LoadedObject],
) -> Result<Vec<UsdtSite>, ProbeError> {
    let file_path = resolve_path(path, objects)?;
    let obj = objects
        .iter()
        .find(|o| o.path == file_path)
        .ok_or_else(|| ProbeError::NotLoaded {
            path: file_path.display().to_string(),
        })?;
    resolve_in(&file_path, obj.bias, provider, name)
}

/// As [`resolve`], for the file at `file_path` loaded with `bias`.
pub fn resolve_in(
    file_path: &Path,
    bias: u64,
    provider: &str,
    name: &str,
) -> Result<Vec<UsdtSite>, ProbeError> {
    let notes = read_notes(file_path)?;
    let data = std::fs::read(file_path).map_err(|e| elf_error(file_path, e))?;
    let file = object::File::parse(&*data).map_err(|e| elf_error(file_path, e))?;
    let mut out = Vec::new();
    for note in notes
        .into_iter()
        .filter(|n| n.provider == provider && n.name == name)
    {
        let shown = format!("{}:{provider}:{name}", file_path.display());
        let args = parse_args(&note.args).map_err(|reason| ProbeError::Unpatchable {
            symbol: shown.clone(),
            offset: 0,
            address: bias.wrapping_add(note.pc),
            reason,
        })?;
        let (fname, start, size) =
            containing_function(&file, note.pc).ok_or_else(|| ProbeError::Unpatchable {
                symbol: shown.clone(),
                offset: 0,
                address: bias.wrapping_add(note.pc),
                reason: "no function symbol covers the probe (a stripped file): the patch \
                         could not be checked against jumps into its bytes"
                    .into(),
            })?;
        out.push(UsdtSite {
            path: file_path.to_path_buf(),
            args,
            address: bias.wrapping_add(note.pc),
            semaphore: if note.semaphore == 0 {
                0
            } else {
                bias.wrapping_add(note.semaphore)
            },
            function: (bias.wrapping_add(start), size),
            function_name: fname,
            note,
        });
    }
    if out.is_empty() {
        return Err(ProbeError::SymbolNotFound {
            path: file_path.display().to_string(),
            symbol: format!("USDT {provider}:{name}"),
            hint: " (no such note in .note.stapsdt)",
        });
    }
    Ok(out)
}

/// How a USDT probe is patched.
pub enum UsdtPatch {
    /// `jmp rel32` to a trampoline (no trap per hit), or an `int3` over
    /// an instruction that is not a `nop` (executed out of line).
    Jump(Attachment),
    /// `int3` over the `nop`: where a jump would overwrite a branch target.
    Trap(Breakpoint),
}

/// An attached USDT probe: the patch and the semaphore it raised.
pub struct UsdtAttachment {
    pub patch: UsdtPatch,
    /// Why the jump could not be used (the probe is then a trap).
    pub jump_refused: Option<String>,
    semaphore: u64,
}

impl UsdtAttachment {
    pub fn address(&self) -> u64 {
        match &self.patch {
            UsdtPatch::Jump(a) => a.address(),
            UsdtPatch::Trap(b) => b.address(),
        }
    }

    pub fn hits(&self) -> u64 {
        match &self.patch {
            UsdtPatch::Jump(a) => a.hits(),
            UsdtPatch::Trap(b) => b.hits(),
        }
    }

    /// The object holding the probe (and its semaphore) was unloaded.
    pub fn forget_unmapped(self) {
        match self.patch {
            UsdtPatch::Jump(a) => a.forget_unmapped(),
            UsdtPatch::Trap(b) => b.forget_unmapped(),
        }
    }

    /// Lowers the semaphore, then removes the patch.
    pub fn detach(self) -> Result<(), ProbeError> {
        if self.semaphore != 0 {
            semaphore(self.semaphore).fetch_sub(1, Ordering::SeqCst);
        }
        match self.patch {
            UsdtPatch::Jump(a) => a.detach(),
            UsdtPatch::Trap(b) => b.detach(),
        }
    }
}

fn semaphore(addr: u64) -> &'static AtomicU16 {
    // SAFETY: the note's semaphore is a 2-byte aligned `unsigned short` in
    // the writable `.probes` section of a loaded object; programs read it
    // with plain loads, tracers (the kernel's uprobes included) update it.
    unsafe { &*(addr as *const AtomicU16) }
}

/// Patches the probe's `nop` — with a jump to a trampoline where that is
/// safe, else with `int3` ([`crate::breakpoint`]) — and raises its
/// semaphore.
pub fn attach(site: &UsdtSite, handler: ProbeHandler) -> Result<UsdtAttachment, ProbeError> {
    let (start, size) = site.function;
    let target = ResolvedSymbol {
        path: site.path.clone(),
        symbol: format!(
            "{} (USDT {}:{})",
            site.function_name, site.note.provider, site.note.name
        ),
        offset: site.address - start,
        address: site.address,
        remaining: start + size - site.address,
    };
    let (patch, jump_refused) = attach_inside(&target, start, handler)?;
    if site.semaphore != 0 {
        semaphore(site.semaphore).fetch_add(1, Ordering::SeqCst);
    }
    Ok(UsdtAttachment {
        patch,
        jump_refused,
        semaphore: site.semaphore,
    })
}

/// An entry handler at an address inside a function that starts at
/// `function_start` (a USDT probe's `nop`, a uprobe at `SYMBOL+OFF`): a
/// jump patch when no branch of the function lands in the patched bytes
/// and the function's size is known, else an `int3` over the instruction
/// (resuming after a `nop`, or executing another instruction out of
/// line); with why the jump was refused.
pub fn attach_inside(
    target: &ResolvedSymbol,
    function_start: u64,
    handler: ProbeHandler,
) -> Result<(UsdtPatch, Option<String>), ProbeError> {
    let start = function_start;
    let shared: Arc<dyn Fn(&mut crate::PtRegs) + Send + Sync> = Arc::from(handler);
    let h = shared.clone();
    let jump = if target.remaining == 0 {
        // Without the function's end, branches after the address cannot
        // be checked.
        Err(ProbeError::Unpatchable {
            symbol: target.symbol.clone(),
            offset: target.offset,
            address: target.address,
            reason: "the function's size is unknown".into(),
        })
    } else {
        attach_mid_function(target, start, Box::new(move |r| h(r)))
    };
    let (patch, jump_refused) = match jump {
        Ok(a) => (UsdtPatch::Jump(a), None),
        Err(ProbeError::Unpatchable { reason, .. })
            // SAFETY: the target is mapped code of this process.
            if unsafe { *(target.address as *const u8) } != 0x90 =>
        {
            // Not a `nop` (a uprobe at SYMBOL+OFF): the int3 executes the
            // instruction it replaces out of line.
            let h = shared.clone();
            let a = crate::uprobe::attach_int3_at(
                target,
                Some(Box::new(move |r| h(r))),
                None,
                reason.clone(),
            )?;
            (UsdtPatch::Jump(a), Some(reason))
        }
        Err(ProbeError::Unpatchable { reason, .. }) => {
            let h = shared.clone();
            let b = breakpoint::attach(target.address, Box::new(move |r| h(r))).map_err(
                |e| match e {
                    ProbeError::Unpatchable {
                        reason: trap_reason,
                        ..
                    } => ProbeError::Unpatchable {
                        symbol: target.symbol.clone(),
                        offset: target.offset,
                        address: target.address,
                        reason: format!("{reason}; int3: {trap_reason}"),
                    },
                    e => e,
                },
            )?;
            (UsdtPatch::Trap(b), Some(reason))
        }
        Err(e) => return Err(e),
    };
    Ok((patch, jump_refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libbpf_forms() {
        let a = parse_arg("-4@%edi").unwrap();
        assert_eq!(
            (a.kind, a.reg_off, a.signed, a.bitshift),
            (ArgKind::Reg, 112, true, 32)
        );
        let a = parse_arg("8@-16(%rbp)").unwrap();
        assert_eq!(
            (a.kind, a.val_off as i64, a.reg_off),
            (ArgKind::RegDeref, -16, 32)
        );
        let a = parse_arg("8@(%rsp)").unwrap();
        assert_eq!((a.kind, a.val_off, a.reg_off), (ArgKind::RegDeref, 0, 152));
        let a = parse_arg("-4@$-9").unwrap();
        assert_eq!(
            (a.kind, a.val_off as i64, a.signed),
            (ArgKind::Const, -9, true)
        );
        let a = parse_arg("1@%sil").unwrap();
        assert_eq!((a.reg_off, a.bitshift, a.signed), (104, 56, false));
        assert!(parse_arg("4@counter(%rip)").unwrap_err().contains("offset"));
        assert!(parse_arg("8@(%rax,%rbx,8)").is_err());
        assert!(parse_arg("3@%eax").is_err());
        assert!(parse_arg("4@%ah").is_err());
        assert_eq!(parse_args("-4@%edi 8@-16(%rbp) 8@$5").unwrap().len(), 3);
    }

    #[test]
    fn encodes_libbpf_layout() {
        let spec = UsdtSpec {
            args: parse_args("-2@%cx 8@$5").unwrap(),
            cookie: 0x1122,
        };
        let b = spec.encode();
        assert_eq!(&b[8..12], &1u32.to_le_bytes()); // REG
        assert_eq!(&b[12..14], &88i16.to_le_bytes()); // rcx
        assert_eq!((b[14], b[15]), (1, 48));
        assert_eq!(&b[16..24], &5u64.to_le_bytes());
        assert_eq!(&b[24..28], &0u32.to_le_bytes()); // CONST
        assert_eq!(&b[192..200], &0x1122u64.to_le_bytes());
        assert_eq!(&b[200..202], &2i16.to_le_bytes());
    }

    #[test]
    fn parses_a_note() {
        // One stapsdt note: pc 0x1000, base 0x2000 (actual 0x2010), sema 0x3000.
        let mut desc = Vec::new();
        desc.extend_from_slice(&0x1000u64.to_le_bytes());
        desc.extend_from_slice(&0x2000u64.to_le_bytes());
        desc.extend_from_slice(&0x3000u64.to_le_bytes());
        desc.extend_from_slice(b"prov\0probe\0-4@%edi\0");
        let mut note = Vec::new();
        note.extend_from_slice(&8u32.to_le_bytes());
        note.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        note.extend_from_slice(&3u32.to_le_bytes());
        note.extend_from_slice(b"stapsdt\0");
        note.extend_from_slice(&desc);
        note.resize(note.len().next_multiple_of(4), 0);
        let n = parse_notes(&note, Some(0x2010)).unwrap();
        assert_eq!(n.len(), 1);
        assert_eq!((n[0].pc, n[0].semaphore), (0x1010, 0x3000));
        assert_eq!(
            (&*n[0].provider, &*n[0].name, &*n[0].args),
            ("prov", "probe", "-4@%edi")
        );
        assert!(parse_notes(&note[..note.len() - 8], None).is_err());
    }
}
