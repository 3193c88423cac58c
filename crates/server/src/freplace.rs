//! `BPF_PROG_TYPE_EXT` (freplace): a program that replaces a global
//! function of another, loaded program — libxdp's dispatcher calls its
//! component programs through `prog0..prog9` this way.
//!
//! At load an EXT program names its target (`attach_prog_fd`,
//! `attach_btf_id`); it is checked against the target function's BTF
//! signature as the kernel's `btf_check_type_match` does and verified under
//! the target's program type (XDP). A freplace link (`BPF_LINK_CREATE` of
//! an EXT program, or `BPF_RAW_TRACEPOINT_OPEN` with its load-time target)
//! puts it in place of the function.
//!
//! # How the replacement runs
//! A program runs as bpfjet builds it from its record; with EXT programs
//! linked into it, it is built *linked*: each replaced function's body is
//! swapped for the EXT program's code (its own subprograms included), and
//! every call to the function is pointed at that code. The whole program is
//! then verified and compiled as one, so the JIT calls the replacement
//! directly and folds the dispatcher's frozen `.rodata` configuration. A
//! link made or removed while the target is attached bumps the
//! attachment's revision; its data plane rebuilds the program and swaps it
//! in atomically between batches (its hot replace), so a packet runs either
//! the old or the new set of functions, never a mix. With nothing linked,
//! the original function runs.

use crate::attach;
use crate::backend::BpfjetBackend;
use crate::links::{word, LinkRecord};
use crate::namespace::{Kind, Namespace, ObjRef};
use crate::objects::{Obj, ProgObj, ProgRecord};
use crate::progs::{self, Refusal, BPF_PROG_TYPE_XDP};
use bpfjet_obj::{Btf, BtfType, Linkage};
use bpfjet_sys::{Errno, ProgLoad};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const BPF_PROG_TYPE_EXT: u32 = 28;

const CALL: u8 = 0x85;
const LD_IMM64: u8 = 0x18;
const PSEUDO_CALL: u8 = 1;
const PSEUDO_FUNC: u8 = 4;

/// The function of `target` (its BTF `btf`) whose `FUNC` type id is
/// `btf_id`: its first instruction. Errors are the kernel's log lines.
pub fn target_function(btf: &Btf, target: &ProgRecord, btf_id: u32) -> Result<u32, String> {
    let Some(BtfType::Func { name, .. }) = btf.type_by_id(btf_id) else {
        return Err(format!("attach_btf_id {btf_id} is not a function"));
    };
    // A static function is refused by the signature check ("is not a
    // global function"), as in the kernel.
    let Some(&(insn_off, _)) = target.func_info.iter().find(|(_, t)| *t == btf_id) else {
        return Err(format!("Subprog {name} doesn't exist"));
    };
    Ok(insn_off)
}

fn skip_mods(btf: &Btf, id: u32) -> Option<(u32, &BtfType)> {
    let id = btf.resolve(id)?;
    Some((id, btf.type_by_id(id)?))
}

/// A type's kind and size as `btf_check_func_type_match` compares them
/// (`t->info` and `t->size`).
fn kind_and_size(t: &BtfType) -> (&'static str, Option<u32>) {
    match t {
        BtfType::Void => ("void", None),
        BtfType::Int { size, .. } => ("int", Some(*size)),
        BtfType::Ptr { .. } => ("ptr", None),
        BtfType::Enum { size, .. } => ("enum", Some(*size)),
        BtfType::Struct { size, .. } => ("struct", Some(*size)),
        BtfType::Union { size, .. } => ("union", Some(*size)),
        BtfType::Float { size, .. } => ("float", Some(*size)),
        BtfType::Array { .. } => ("array", None),
        _ => ("other", None),
    }
}

/// `FUNC` `id`'s name, prototype return type and parameters.
fn func(btf: &Btf, id: u32) -> Result<(&str, Linkage, u32, Vec<u32>), String> {
    let Some(BtfType::Func {
        name,
        proto,
        linkage,
    }) = btf.type_by_id(id)
    else {
        return Err(format!("type {id} is not a function"));
    };
    let Some(BtfType::FuncProto { ret, params }) = btf.type_by_id(*proto) else {
        return Err(format!("{name}() has no prototype"));
    };
    Ok((
        name,
        *linkage,
        *ret,
        params.iter().map(|p| p.type_id).collect(),
    ))
}

/// The kernel's `btf_check_func_type_match`: the EXT program's function
/// (`ext_id` in `ext`) may replace the target's (`tgt_id` in `tgt`).
pub fn check_signature(ext: &Btf, ext_id: u32, tgt: &Btf, tgt_id: u32) -> Result<(), String> {
    let (fn1, l1, ret1, args1) = func(ext, ext_id)?;
    let (fn2, l2, ret2, args2) = func(tgt, tgt_id)?;
    if l1 != Linkage::Global {
        return Err(format!("{fn1}() is not a global function"));
    }
    if l2 != Linkage::Global {
        return Err(format!("{fn2}() is not a global function"));
    }
    if args1.len() != args2.len() {
        return Err(format!(
            "{fn1}() has {} args while {fn2}() has {} args",
            args1.len(),
            args2.len()
        ));
    }
    let bad = || format!("{fn1}() has a malformed type");
    let (_, r1) = skip_mods(ext, ret1).ok_or_else(bad)?;
    let (_, r2) = skip_mods(tgt, ret2).ok_or_else(bad)?;
    if kind_and_size(r1) != kind_and_size(r2) {
        return Err(format!(
            "Return type {} of {fn1}() doesn't match type {} of {fn2}()",
            kind_and_size(r1).0,
            kind_and_size(r2).0
        ));
    }
    for (i, (&a1, &a2)) in args1.iter().zip(&args2).enumerate() {
        let (_, t1) = skip_mods(ext, a1).ok_or_else(bad)?;
        let (_, t2) = skip_mods(tgt, a2).ok_or_else(bad)?;
        let (k1, s1) = kind_and_size(t1);
        let (k2, s2) = kind_and_size(t2);
        if k1 != k2 {
            return Err(format!("arg{i} in {fn1}() is {k1} while {fn2}() has {k2}"));
        }
        if s1 != s2 {
            return Err(format!(
                "arg{i} in {fn1}() has size {} while {fn2}() has {}",
                s1.unwrap_or(0),
                s2.unwrap_or(0)
            ));
        }
        match (t1, t2) {
            (BtfType::Int { .. } | BtfType::Enum { .. }, _) => {}
            (BtfType::Ptr { target: p1 }, BtfType::Ptr { target: p2 }) => {
                let pointee = |btf: &Btf, p: u32| match skip_mods(btf, p) {
                    Some((_, BtfType::Struct { name, .. })) => Some(name.clone()),
                    _ => None,
                };
                let Some(s1) = pointee(ext, *p1) else {
                    return Err(format!("arg{i} in {fn1}() is not a pointer to context"));
                };
                let Some(s2) = pointee(tgt, *p2) else {
                    return Err(format!("arg{i} in {fn2}() is not a pointer to context"));
                };
                if s1 != s2 {
                    return Err(format!(
                        "arg{i} {fn1}(struct {s1} *) doesn't match {fn2}(struct {s2} *)"
                    ));
                }
            }
            _ => return Err(format!("arg{i} in {fn1}() has unrecognized type")),
        }
    }
    Ok(())
}

fn fields(word: u64) -> (u8, u8, i32) {
    let b = word.to_le_bytes();
    (
        b[0],
        b[1] >> 4,
        i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    )
}

fn set_imm(word: &mut u64, imm: i32) {
    let mut b = word.to_le_bytes();
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    *word = u64::from_le_bytes(b);
}

/// A BPF-to-BPF reference at `pc` (a pseudo call or a callback's
/// `ld_imm64`): the instruction it targets.
fn local_target(words: &[u64], pc: usize) -> Option<usize> {
    let (code, src, imm) = fields(words[pc]);
    let is_ref = (code == CALL && src == PSEUDO_CALL) || (code == LD_IMM64 && src == PSEUDO_FUNC);
    if !is_ref {
        return None;
    }
    usize::try_from(pc as i64 + 1 + i64::from(imm)).ok()
}

/// Where the functions of a program start: its entry, its `func_info`
/// and every BPF-to-BPF call or callback target.
fn function_starts(rec: &ProgRecord) -> BTreeSet<usize> {
    let words = &rec.insns;
    let mut starts: BTreeSet<usize> = BTreeSet::from([0]);
    starts.extend(rec.func_info.iter().map(|&(off, _)| off as usize));
    let mut pc = 0;
    while pc < words.len() {
        if let Some(t) = local_target(words, pc) {
            starts.insert(t);
        }
        pc += if fields(words[pc]).0 == LD_IMM64 {
            2
        } else {
            1
        };
    }
    starts.retain(|&s| s < words.len());
    starts
}

/// One EXT program linked in place of the function at `insn_off`.
pub struct Replacement<'a> {
    pub insn_off: u32,
    pub ext: &'a ProgRecord,
}

/// `target` as it runs with `reps` linked into it: the record to build
/// (same id, name and type; instructions and maps of the linked program).
pub fn link(target: &ProgRecord, reps: &[Replacement]) -> Result<ProgRecord, String> {
    let mut out = target.clone();
    out.func_info.clear();
    if reps.is_empty() {
        return Ok(out);
    }
    // The entry function replaced: the EXT program runs instead.
    if let Some(r) = reps.iter().find(|r| r.insn_off == 0) {
        out.insns = r.ext.insns.clone();
        out.map_ids = r.ext.map_ids.clone();
        out.prog_flags = target.prog_flags | r.ext.prog_flags;
        return Ok(out);
    }
    let starts: Vec<usize> = function_starts(target).into_iter().collect();
    let words = &target.insns;
    let mut map_ids = target.map_ids.clone();
    let mut insns: Vec<u64> = Vec::with_capacity(words.len());
    // Old start of each function -> new start.
    let mut moved = std::collections::HashMap::new();
    // New pc -> old pc, for the target's own instructions.
    let mut origin: Vec<Option<usize>> = Vec::with_capacity(words.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(words.len());
        moved.insert(start, insns.len());
        match reps.iter().find(|r| r.insn_off as usize == start) {
            Some(r) => {
                let mut code = r.ext.insns.clone();
                for (pc, src) in progs::map_lddws(&code) {
                    let index = (code[pc] >> 32) as usize;
                    let id = *r.ext.map_ids.get(index).ok_or_else(|| {
                        format!("{}: insn {pc}: map index {index} out of range", r.ext.name)
                    })?;
                    let new = match map_ids.iter().position(|&m| m == id) {
                        Some(p) => p,
                        None => {
                            map_ids.push(id);
                            map_ids.len() - 1
                        }
                    };
                    progs::set_map_index(&mut code[pc], src, new as u32);
                }
                origin.extend(std::iter::repeat_n(None, code.len()));
                insns.extend(code);
            }
            None => {
                origin.extend((start..end).map(Some));
                insns.extend_from_slice(&words[start..end]);
            }
        }
    }
    for r in reps {
        if !moved.contains_key(&(r.insn_off as usize)) {
            return Err(format!(
                "{}: no function starts at insn {}",
                target.name, r.insn_off
            ));
        }
    }
    // The target's own calls follow the functions they name.
    for (new_pc, old) in origin.iter().enumerate() {
        let Some(old_pc) = *old else { continue };
        if let Some(t) = local_target(words, old_pc) {
            let new_t = *moved
                .get(&t)
                .ok_or_else(|| format!("{}: insn {old_pc} calls into a function", target.name))?;
            set_imm(
                &mut insns[new_pc],
                (new_t as i64 - new_pc as i64 - 1) as i32,
            );
        }
    }
    out.insns = insns;
    out.map_ids = map_ids;
    Ok(out)
}

/// `BPF_LINK_TYPE_TRACING`.
const BPF_LINK_TYPE_TRACING: u32 = 2;

pub(crate) fn read_prog(ns: &Namespace, id: u32) -> Result<ProgRecord, Errno> {
    serde_json::from_slice(&ns.read_record(Kind::Prog, id)?).map_err(|_| Errno::EINVAL)
}

fn read_btf(ns: &Namespace, id: u32) -> Result<Btf, String> {
    let raw = ns
        .read_record(Kind::Btf, id)
        .map_err(|_| format!("BTF id {id} is gone"))?;
    Btf::parse(&raw).map_err(|e| e.to_string())
}

/// Whether any freplace link is in effect on program `target_id`.
pub fn has_links(ns: &Namespace, target_id: u32) -> bool {
    !links_into(ns, target_id).is_empty()
}

/// The freplace links in effect on program `target_id`.
fn links_into(ns: &Namespace, target_id: u32) -> Vec<LinkRecord> {
    let mut v: Vec<LinkRecord> = ns
        .ids(Kind::Link)
        .into_iter()
        .filter_map(|l| serde_json::from_slice(&ns.read_record(Kind::Link, l).ok()?).ok())
        .filter(|r: &LinkRecord| r.target_prog_id == target_id && !r.detached)
        .collect();
    v.sort_by_key(|r| r.id);
    v
}

/// Program `rec` as it runs now: with the EXT programs linked into its
/// functions (itself when none is).
pub fn linked_record(ns: &Namespace, rec: &ProgRecord) -> Result<ProgRecord, String> {
    let links = links_into(ns, rec.id);
    if links.is_empty() {
        return Ok(rec.clone());
    }
    let exts = links
        .iter()
        .map(|l| {
            read_prog(ns, l.prog_id)
                .map_err(|_| format!("EXT program id {} of link {} is gone", l.prog_id, l.id))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let reps: Vec<Replacement> = links
        .iter()
        .zip(&exts)
        .map(|(l, ext)| Replacement {
            insn_off: l.target_insn_off,
            ext,
        })
        .collect();
    link(rec, &reps)
}

/// `struct bpf_link_info` of a freplace link: the tracing member.
pub fn link_info(rec: &LinkRecord, size: usize) -> (Vec<u8>, usize) {
    let mut b = vec![0u8; size];
    let mut put = |off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    put(0, BPF_LINK_TYPE_TRACING);
    put(4, rec.id);
    put(8, rec.prog_id);
    if !rec.detached {
        put(16, rec.attach_type);
        put(20, rec.target_prog_id);
        put(24, rec.target_btf_id);
    }
    (b, size)
}

impl BpfjetBackend {
    /// A bpfjet EXT program behind `fd`.
    pub(crate) fn ext_prog(&self, fd: u32) -> Option<Arc<ProgObj>> {
        match self.obj(fd)? {
            Obj::Prog(p) if p.rec.prog_type == BPF_PROG_TYPE_EXT => Some(p),
            _ => None,
        }
    }

    /// The BTF of a program record, parsed.
    pub(crate) fn prog_btf(&self, rec: &ProgRecord) -> Result<Btf, String> {
        if rec.btf_id == 0 {
            return Err(format!("program {} has no BTF", rec.id));
        }
        read_btf(&self.ns, rec.btf_id)
    }

    /// Whether EXT program `ext` (loaded with BTF and func_info) can
    /// replace the function `btf_id` of `target`: that function's first
    /// instruction.
    fn check_ext_target(
        &self,
        ext_btf: &Btf,
        ext_func: u32,
        target: &ProgRecord,
        btf_id: u32,
    ) -> Result<u32, String> {
        if target.prog_type != BPF_PROG_TYPE_XDP {
            return Err(format!(
                "bpfjet extends XDP programs only (target program {} has type {})",
                target.id, target.prog_type
            ));
        }
        let tgt_btf = self
            .prog_btf(target)
            .map_err(|_| "Target program doesn't have BTF".to_string())?;
        let insn_off = target_function(&tgt_btf, target, btf_id)?;
        check_signature(ext_btf, ext_func, &tgt_btf, btf_id)?;
        Ok(insn_off)
    }

    /// `BPF_PROG_LOAD` of an EXT program: its target `(prog id, btf id,
    /// target BTF id)`. None: the target is not bpfjet's (the kernel's
    /// load).
    pub(crate) fn ext_load_target(
        &self,
        p: &ProgLoad,
        func_info: &[(u32, u32)],
    ) -> Option<Result<(u32, u32, u32), Refusal>> {
        let refuse = |log: String| Some(Err(Refusal::new(Errno::EINVAL, log)));
        if p.attach_prog_fd == 0 {
            return refuse("EXT programs need a target program (attach_prog_fd)".into());
        }
        let target = match self.obj(p.attach_prog_fd)? {
            Obj::Prog(t) => t,
            _ => return refuse(format!("fd {} is not a program", p.attach_prog_fd)),
        };
        let ext_btf = match self.obj(p.prog_btf_fd) {
            Some(Obj::Btf(b)) if p.prog_btf_fd != 0 => match Btf::parse(&b.raw) {
                Ok(btf) => btf,
                Err(e) => return refuse(e.to_string()),
            },
            _ => return refuse("Extension programs need BTF (prog_btf_fd)".into()),
        };
        let Some(&(_, ext_func)) = func_info.first() else {
            return refuse("Extension programs need BTF func_info".into());
        };
        let target = read_prog(&self.ns, target.rec.id).unwrap_or_else(|_| target.rec.clone());
        match self.check_ext_target(&ext_btf, ext_func, &target, p.attach_btf_id) {
            Ok(_) => Some(Ok((target.id, p.attach_btf_id, target.btf_id))),
            Err(log) => refuse(log),
        }
    }

    /// `BPF_LINK_CREATE` of an EXT program: `target_fd` and
    /// `target_btf_id` name another target, both 0 the load-time one.
    pub(crate) fn freplace_link_create(&self, raw: &[u8]) -> Result<i64, Errno> {
        let ext = self.ext_prog(word(raw, 0)).ok_or(Errno::EINVAL)?;
        let (target_fd, btf_id) = (word(raw, 4), word(raw, 16));
        let target = if target_fd != 0 || btf_id != 0 {
            if target_fd == 0 || btf_id == 0 {
                return Err(Errno::EINVAL);
            }
            match self.obj(target_fd) {
                Some(Obj::Prog(t)) => Some((t.rec.id, btf_id)),
                _ => return Err(Errno::EINVAL),
            }
        } else {
            None
        };
        self.freplace_attach(&ext, target)
    }

    /// `BPF_RAW_TRACEPOINT_OPEN` with no name of an EXT program: a link to
    /// its load-time target (libbpf's and libxdp's older path). None: not
    /// a bpfjet program (the kernel's).
    pub(crate) fn raw_tracepoint_open(&self, raw: &[u8]) -> Option<Result<i64, Errno>> {
        let name = crate::links::dword(raw, 0);
        let prog = match self.obj(word(raw, 8))? {
            Obj::Prog(p) => p,
            _ => return Some(Err(Errno::EINVAL)),
        };
        if prog.rec.prog_type != BPF_PROG_TYPE_EXT || name != 0 {
            self.warn_once(
                "BPF_RAW_TRACEPOINT_OPEN of a bpfjet program",
                "bpfjet attaches only EXT programs this way (freplace)",
            );
            return Some(Err(Errno::EINVAL));
        }
        Some(self.freplace_attach(&prog, None))
    }

    fn freplace_attach(&self, ext: &ProgObj, target: Option<(u32, u32)>) -> Result<i64, Errno> {
        let mut rec = read_prog(&self.ns, ext.rec.id)?;
        let (target_id, btf_id) = match target {
            Some(t) => t,
            None if rec.load_target_used || rec.attach_prog_id == 0 => return Err(Errno::EINVAL),
            None => (rec.attach_prog_id, rec.attach_btf_id),
        };
        let target = read_prog(&self.ns, target_id).map_err(|_| Errno::ENOENT)?;
        let ext_btf = self.prog_btf(&rec).map_err(|_| Errno::EINVAL)?;
        let ext_func = rec.func_info.first().ok_or(Errno::EINVAL)?.1;
        let insn_off = self
            .check_ext_target(&ext_btf, ext_func, &target, btf_id)
            .map_err(|why| {
                self.warn_once(&format!("freplace link of {}", rec.name), &why);
                Errno::EINVAL
            })?;
        // One extension per function, as the kernel's trampoline.
        if links_into(&self.ns, target_id)
            .iter()
            .any(|l| l.target_btf_id == btf_id)
        {
            return Err(Errno::EBUSY);
        }
        let link = LinkRecord {
            id: 0,
            prog_id: rec.id,
            ifindex: 0,
            flags: 0,
            target_prog_id: target_id,
            target_btf_id: btf_id,
            target_insn_off: insn_off,
            attach_type: rec.expected_attach_type,
            detached: false,
            probe: None,
            uprobe_multi: None,
        };
        let (id, _creating) = self.ns.create_record(Kind::Link, |id| {
            let mut r = link.clone();
            r.id = id;
            serde_json::to_vec(&r).unwrap_or_default()
        })?;
        if !rec.load_target_used {
            rec.load_target_used = true;
            let bytes = serde_json::to_vec(&rec).map_err(|_| Errno::EINVAL)?;
            self.ns.write_record(Kind::Prog, rec.id, &bytes)?;
        }
        let fd = self.new_fd(Obj::Link(id))?;
        if let Err(e) = self.relink(target_id) {
            self.release_freplace_link(self.link_record(id)?);
            return Err(e);
        }
        Ok(fd)
    }

    /// Every attachment running `target_id` rebuilds it (an EXT program
    /// was linked into or out of it).
    fn relink(&self, target_id: u32) -> Result<(), Errno> {
        for a in self.ns.attachments() {
            if a.prog_id == target_id {
                let mut next = a.clone();
                next.revision += 1;
                attach::replace(&self.ns, &next)?;
            }
        }
        Ok(())
    }

    pub(crate) fn freplace_link_detach(&self, mut rec: LinkRecord) -> Result<i64, Errno> {
        if rec.detached {
            return Err(Errno(67)); // ENOLINK
        }
        rec.detached = true;
        self.write_link(&rec)?;
        self.relink(rec.target_prog_id)?;
        // A detached link no longer holds its target (the kernel puts it).
        self.release(ObjRef::Prog(rec.target_prog_id));
        Ok(0)
    }

    /// The link's last reference is gone: the function is the target's own
    /// again; the link lets go of both programs.
    pub(crate) fn release_freplace_link(&self, rec: LinkRecord) {
        self.ns.remove_record(Kind::Link, rec.id);
        if !rec.detached {
            let _ = self.relink(rec.target_prog_id);
        }
        self.release(ObjRef::Prog(rec.prog_id));
        if !rec.detached {
            self.release(ObjRef::Prog(rec.target_prog_id));
        }
    }
}

/// `BPF_PROG_LOAD`'s `func_info` records: `(insn_off, type_id)` each.
pub fn read_func_info(p: &ProgLoad) -> Result<Vec<(u32, u32)>, Errno> {
    if p.func_info_cnt == 0 {
        return Ok(Vec::new());
    }
    let rec_size = p.func_info_rec_size as usize;
    if !(8..=4096).contains(&rec_size) || p.prog_btf_fd == 0 {
        return Err(Errno::EINVAL);
    }
    let raw = crate::user::read(p.func_info, rec_size * p.func_info_cnt as usize)?;
    Ok(raw
        .chunks(rec_size)
        .map(|c| {
            let w = |i: usize| u32::from_ne_bytes(c[i..i + 4].try_into().unwrap());
            (w(0), w(4))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
        let mut b = [0u8; 8];
        b[0] = code;
        b[1] = dst | (src << 4);
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..].copy_from_slice(&imm.to_le_bytes());
        u64::from_le_bytes(b)
    }

    fn rec(insns: Vec<u64>, map_ids: Vec<u32>) -> ProgRecord {
        ProgRecord {
            id: 1,
            prog_type: 6,
            expected_attach_type: 0,
            prog_flags: 0,
            name: "t".into(),
            license: "GPL".into(),
            insns,
            map_ids,
            btf_id: 0,
            load_time: 0,
            uid: 0,
            tag: [0; 8],
            func_info: Vec::new(),
            attach_prog_id: 0,
            attach_btf_id: 0,
            attach_btf_obj_id: 0,
            load_target_used: false,
            kfuncs: Vec::new(),
            weak_kfuncs: Vec::new(),
            tracepoint: String::new(),
        }
    }

    #[test]
    fn a_replaced_subprogram_is_swapped_and_calls_follow() {
        const EXIT: u64 = 0x95;
        // main: call f; call g; exit.  f: r0 = 1; exit.  g: r0 = 2; exit.
        let target = rec(
            vec![
                insn(CALL, 0, PSEUDO_CALL, 0, 2),
                insn(CALL, 0, PSEUDO_CALL, 0, 3),
                EXIT,
                insn(0xb7, 0, 0, 0, 1),
                EXIT,
                insn(0xb7, 0, 0, 0, 2),
                EXIT,
            ],
            vec![7],
        );
        // ext: r1 = map idx 0 (id 9); r0 = 5; exit (three words: ld_imm64 is two).
        let ext = rec(
            vec![
                insn(LD_IMM64, 1, progs::PSEUDO_MAP_IDX, 0, 0),
                0,
                insn(0xb7, 0, 0, 0, 5),
                EXIT,
            ],
            vec![9],
        );
        let linked = link(
            &target,
            &[Replacement {
                insn_off: 3,
                ext: &ext,
            }],
        )
        .unwrap();
        assert_eq!(linked.map_ids, vec![7, 9]);
        let w = &linked.insns;
        assert_eq!(w.len(), 3 + 4 + 2);
        // call f now lands on the EXT code at 3, call g on g's new place 7.
        assert_eq!(local_target(w, 0), Some(3));
        assert_eq!(local_target(w, 1), Some(7));
        assert_eq!(fields(w[3]).2, 1, "the EXT's map index follows the table");
        assert_eq!(fields(w[5]).2, 5);
        assert_eq!(fields(w[7]).2, 2);
    }

    #[test]
    fn nothing_linked_is_the_original() {
        let target = rec(vec![insn(0xb7, 0, 0, 0, 2), 0x95], vec![]);
        assert_eq!(link(&target, &[]).unwrap().insns, target.insns);
    }

    /// Functions of one object compiled here, each the target or the
    /// extension of a signature check, with the kernel's verdicts.
    #[test]
    fn signatures_are_checked_as_the_kernel_does() {
        let obj = bpfjet_testsupport::Compile::text(
            "freplace_signatures",
            r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct other { int x; };
__attribute__((noinline)) int slot(struct xdp_md *ctx) { return ctx ? 2 : 0; }
__attribute__((noinline)) int slot_too(struct xdp_md *c) { return c ? 1 : 0; }
__attribute__((noinline)) int two(struct xdp_md *ctx, int a) { return ctx ? a : 0; }
__attribute__((noinline)) long wide(struct xdp_md *ctx) { return ctx ? 1 : 0; }
__attribute__((noinline)) int other_ctx(struct other *o) { return o ? 1 : 0; }
__attribute__((noinline)) int scalar(int a) { return a + 1; }
__attribute__((noinline)) int scalar64(long a) { return a + 1; }
static __attribute__((noinline)) int hidden(struct xdp_md *ctx) { return ctx ? 1 : 0; }
SEC("xdp") int entry(struct xdp_md *ctx) {
    return slot(ctx) + slot_too(ctx) + two(ctx, 1) + wide(ctx) + other_ctx(0)
        + scalar(1) + scalar64(2) + hidden(ctx);
}
char _license[] SEC("license") = "GPL";
"#,
        )
        .object();
        let object = bpfjet_obj::load_file(&obj).expect("the object loads");
        let btf = object.btf.expect("compiled with -g: BTF");
        let id = |name: &str| btf.func_id(name).unwrap_or_else(|| panic!("FUNC {name}"));
        let check = |ext: &str, tgt: &str| check_signature(&btf, id(ext), &btf, id(tgt));
        assert_eq!(check("slot_too", "slot"), Ok(()));
        assert_eq!(
            check("two", "slot"),
            Err("two() has 2 args while slot() has 1 args".into())
        );
        // long vs int: the kernel compares kind and size, and names kinds.
        assert_eq!(
            check("wide", "slot"),
            Err("Return type int of wide() doesn't match type int of slot()".into())
        );
        assert_eq!(
            check("other_ctx", "slot"),
            Err("arg0 other_ctx(struct other *) doesn't match slot(struct xdp_md *)".into())
        );
        assert_eq!(
            check("scalar64", "scalar"),
            Err("arg0 in scalar64() has size 8 while scalar() has 4".into())
        );
        assert_eq!(
            check("scalar", "slot"),
            Err("arg0 in scalar() is int while slot() has ptr".into())
        );
        assert_eq!(
            check("slot", "hidden"),
            Err("hidden() is not a global function".into())
        );
    }
}
