//! Helper calls: arguments checked against the prototype (pointer + size
//! pairs, map key/value sizes, context, callbacks, references), map/helper
//! compatibility, and the call's effect (clobbered r1–r5, r0 from the return
//! type, released references, invalidated packet pointers).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::facts::ConstKeyLookup;
use crate::frame::{CallbackInfo, Frame, RefInfo, State, MAX_FRAMES};
use crate::mem::Access;
use crate::proto::{self, ArgType, CallbackKind, HelperProto, RetType};
use crate::range::Scalar;
use crate::reg_state::{MemKind, RegState, RegType};
use bpfjet_maps::spec::flags;
use bpfjet_maps::MapType;

/// Kernel's `BPF_MAX_VAR_SIZ`.
const MAX_VAR_SIZE: u64 = 1 << 29;

/// `bpf_snprintf`'s helper id.
const SNPRINTF: i32 = 165;

/// What argument checking learned.
#[derive(Default)]
pub(crate) struct Meta {
    map: Option<u32>,
    /// Pending memory argument (register number, whether the helper writes it).
    mem: Option<(u8, bool, bool)>,
    pub(crate) release: Option<u32>,
    alloc_size: Option<u64>,
    callback: Option<u32>,
    /// Stack ranges the helper writes: (frame, lo, hi).
    clobber: Vec<(usize, i64, i64)>,
    /// `bpf_map_lookup_elem` on an array with a constant in-range key:
    /// the result cannot be NULL.
    const_key_in_range: bool,
    /// The initialised dynptr argument (its state), for a slice returned.
    dynptr: Option<RegState>,
    /// A dynptr argument the call initialises: (frame, offset, kind).
    init_dynptr: Option<(usize, i64, crate::reg_state::DynptrKind)>,
}

fn map_allows(map: MapType, id: i32) -> bool {
    use MapType::*;
    match map {
        ProgArray => id == 12,
        PerfEventArray => matches!(id, 25 | 121),
        CgroupArray => id == 37,
        StackTrace => id == 27,
        Ringbuf => matches!(id, 130 | 131 | 134 | 198),
        UserRingbuf => id == 209,
        Queue | Stack => matches!(id, 87..=89),
        BloomFilter => matches!(id, 87 | 89),
        Devmap | DevmapHash | Xskmap => matches!(id, 1 | 51),
        Cpumap => id == 51,
        ArrayOfMaps | HashOfMaps => id == 1,
        LpmTrie => matches!(id, 1..=3),
        _ => matches!(id, 1..=3 | 164 | 169..=172 | 195),
    }
}

fn helper_needs(id: i32, map: MapType) -> bool {
    use MapType::*;
    match id {
        12 => map == ProgArray,
        25 | 121 => map == PerfEventArray,
        37 => map == CgroupArray,
        27 => map == StackTrace,
        130 | 131 | 134 | 198 => map == Ringbuf,
        209 => map == UserRingbuf,
        87 | 89 => matches!(map, Queue | Stack | BloomFilter),
        88 => matches!(map, Queue | Stack),
        51 => matches!(map, Devmap | DevmapHash | Cpumap | Xskmap),
        164 => matches!(
            map,
            Hash | Array | PercpuHash | PercpuArray | LruHash | LruPercpuHash
        ),
        195 => matches!(map, PercpuHash | PercpuArray | LruPercpuHash),
        _ => true,
    }
}

impl Verifier<'_> {
    pub(crate) fn check_helper(&mut self, st: &mut State, pc: usize, id: i32) -> VResult<Succ> {
        if id == crate::graph::KPTR_XCHG {
            self.facts.helpers_used.insert(id);
            return self.check_kptr_xchg(st, pc);
        }
        let proto = match proto::helper_proto_for(self.env.prog_type, id, self.env.privileged()) {
            Ok(p) if !p.needs_perfmon || self.env.privileged() => *p,
            Ok(p) => {
                return err(
                    "unknown_helper",
                    format!(
                        "helper {}#{id} is not available without CAP_PERFMON",
                        p.name
                    ),
                )
            }
            Err(why) => return err("unknown_helper", why),
        };
        // The kernel's check, with its words (check_helper_call).
        if proto.gpl_only && !self.env.gpl_compatible {
            return err(
                "gpl_only",
                format!(
                    "cannot call GPL-restricted function from non-GPL compatible program \
                     ({}#{id} is GPL-only; the object's license section is missing or \
                     not GPL-compatible)",
                    proto.name
                ),
            );
        }
        self.facts.helpers_used.insert(id);
        self.check_call_under_lock(st, id, proto.name)?;
        if id == 12 && !st.refs.is_empty() {
            return err(
                "ref_leak",
                "tail_call would lead to reference leak: release the ringbuf reservation first",
            );
        }
        let mut meta = Meta::default();
        for (i, arg) in proto.args.iter().enumerate() {
            if *arg == ArgType::DontCare {
                continue;
            }
            let regno = i as u8 + 1;
            self.check_arg(st, pc, &proto, regno, *arg, &mut meta)?;
        }
        if id == SNPRINTF {
            self.check_snprintf_format(st)?;
        }
        if let Some(map) = meta.map {
            let t = self.map(map).map(|m| m.map_type);
            if let Some(t) = t {
                if !map_allows(t, id) || !helper_needs(id, t) {
                    return err(
                        "map_helper_mismatch",
                        format!(
                            "cannot pass map_type {} ({}) into func {}#{id}",
                            t as u32,
                            t.name(),
                            proto.name
                        ),
                    );
                }
            }
        }
        // Effects.
        self.apply_write_and_release(st, &mut meta);
        if let Some((frame, off, kind)) = meta.init_dynptr {
            self.init_dynptr(st, pc, (frame, off), kind);
        }
        if proto.changes_pkt_data {
            let privileged = self.env.privileged();
            st.for_each_reg(|r| {
                if matches!(r.ty, RegType::Pkt | RegType::PktMeta | RegType::PktEnd) {
                    *r = if privileged {
                        RegState::unknown()
                    } else {
                        RegState::NOT_INIT
                    };
                }
            });
            self.invalidate_slices(st, crate::dynptr::is_pkt_slice);
        }
        if proto.callback == Some(CallbackKind::Timer) {
            let entry = meta.callback.unwrap_or(0) as usize;
            let callback = self.spawn_timer_callback(pc, entry, meta.map.unwrap_or(0))?;
            let r0 = self.helper_ret(st, pc, &proto, &meta)?;
            finish_call(st, r0);
            // The caller goes on; the callback is a path of its own.
            return Ok(Succ::Spawn(pc + 1, entry, callback));
        }
        if let Some(kind) = proto.callback {
            let entry = meta.callback.unwrap_or(0) as usize;
            return self.enter_callback(st, pc, id, kind, entry, meta.map);
        }
        let r0 = self.helper_ret(st, pc, &proto, &meta)?;
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }

    /// The kernel's `check_bpf_snprintf_call`: the format (a read-only map
    /// value, already checked to be a NUL-terminated string) must be one
    /// `bpf_bprintf_prepare` accepts with the `data_len / 8` arguments the
    /// constant `data_len` gives.
    fn check_snprintf_format(&self, st: &State) -> VResult<()> {
        let (fmt, len) = (*st.reg(3), *st.reg(5));
        // A data_len the verifier does not know exactly: the helper checks
        // it at run time.
        let Some(args) = len.const_value() else {
            return Ok(());
        };
        if args % 8 != 0 {
            return err(
                "bad_helper_arg",
                "Invalid format string (data_len is not a multiple of 8)",
            );
        }
        // Checked as a constant string by its argument type already.
        let Some(text) = self.const_str(&fmt) else {
            return Ok(());
        };
        match crate::printf_format::parse(text, |_| {}) {
            Ok(n) if n as u64 <= args / 8 => Ok(()),
            Ok(n) => err(
                "bad_helper_arg",
                format!(
                    "Invalid format string ({n} conversions in {:?}, {} arguments in data_len)",
                    String::from_utf8_lossy(text),
                    args / 8
                ),
            ),
            Err(_) => err(
                "bad_helper_arg",
                format!(
                    "Invalid format string ({:?}: a conversion bpf_snprintf does not have)",
                    String::from_utf8_lossy(text)
                ),
            ),
        }
    }

    /// The string a pointer into a map's initial data points to (the
    /// kernel's fixed plus constant variable offset), without its NUL; None
    /// when it is not such a pointer or the string has no NUL in the value.
    fn const_str(&self, reg: &RegState) -> Option<&[u8]> {
        let RegType::MapValue { map } = reg.ty else {
            return None;
        };
        let data = self.map(map)?.initial_data.as_deref()?;
        let start = (i64::from(reg.off) + reg.val.as_const().unwrap_or(0) as i64).max(0);
        let text = data.get(start as usize..)?;
        Some(&text[..text.iter().position(|&b| b == 0)?])
    }

    /// A call's effects on the caller: the stack ranges it wrote lose their
    /// contents, and the reference it released (if any) is dropped along
    /// with every register holding it.
    pub(crate) fn apply_write_and_release(&self, st: &mut State, meta: &mut Meta) {
        for (frame, lo, hi) in std::mem::take(&mut meta.clobber) {
            if let Some(f) = st.frames.get_mut(frame) {
                let _ = f.stack.clobber(lo, hi, true);
            }
        }
        if let Some(ref_id) = meta.release {
            Verifier::release_dynptr_slots(st, ref_id);
            st.refs.retain(|r| r.id != ref_id);
            let privileged = self.env.privileged();
            st.for_each_reg(|r| {
                if r.ref_id == ref_id {
                    *r = if privileged {
                        RegState::unknown()
                    } else {
                        RegState::NOT_INIT
                    };
                }
            });
        }
    }

    fn helper_ret(
        &mut self,
        st: &mut State,
        pc: usize,
        proto: &HelperProto,
        meta: &Meta,
    ) -> VResult<RegState> {
        Ok(match proto.ret {
            RetType::Integer => RegState::unknown(),
            RetType::Void => RegState::NOT_INIT,
            RetType::PtrToMapValueOrNull => {
                let map = meta.map.unwrap_or(0);
                let id = self.fresh_id();
                let ty = match self.inner_of.get(map as usize).copied().flatten() {
                    Some(inner) => RegType::MapPtr { map: inner },
                    None => RegType::MapValue { map },
                };
                let mut r = RegState::pointer(ty, 0);
                r.maybe_null = !meta.const_key_in_range;
                r.id = id;
                r
            }
            RetType::DynptrSliceOrNull => {
                let d = meta.dynptr.unwrap_or(RegState::NOT_INIT);
                let size = meta.alloc_size.unwrap_or(0) as u32;
                self.dynptr_slice(&d, size, false)
            }
            RetType::PtrToMemOrNull { acquire, .. } => {
                let size = meta.alloc_size.unwrap_or(0) as u32;
                let id = self.fresh_id();
                let mut r = RegState::pointer(
                    RegType::Mem {
                        size,
                        kind: MemKind::Ringbuf,
                    },
                    0,
                );
                r.maybe_null = true;
                r.id = id;
                if acquire {
                    r.ref_id = id;
                    st.refs.push(RefInfo { id, pc });
                }
                r
            }
        })
    }

    pub(crate) fn check_arg(
        &mut self,
        st: &mut State,
        pc: usize,
        proto: &HelperProto,
        regno: u8,
        arg: ArgType,
        meta: &mut Meta,
    ) -> VResult<()> {
        let reg = *st.reg(regno);
        if !reg.is_init() {
            return err(
                "uninit_reg",
                format!(
                    "R{regno} !read_ok: argument {regno} of {} is not set",
                    proto.name
                ),
            );
        }
        // check_func_arg: XDP programs hand packet pointers only to the
        // helpers whose prototype allows it (`pkt_access`).
        if reg.ty.is_pkt() && !proto.pkt_access {
            return err(
                "pkt_helper_arg",
                format!(
                    "helper access to the packet is not allowed (R{regno}, argument {regno} \
                     of {})",
                    proto.name
                ),
            );
        }
        let expect = |what: &str| -> VResult<()> {
            err(
                "bad_helper_arg",
                format!(
                    "R{regno} type={} expected={what} (argument {regno} of {})",
                    type_text(&reg),
                    proto.name
                ),
            )
        };
        match arg {
            ArgType::DontCare => {}
            ArgType::Anything => {
                if reg.is_pointer() && !self.env.privileged() {
                    return err(
                        "ptr_leak",
                        format!("R{regno} leaks addr into helper function {}", proto.name),
                    );
                }
            }
            ArgType::ConstMapPtr => match reg.ty {
                RegType::MapPtr { map } if !reg.maybe_null && reg.off == 0 => {
                    // bpf_timer_init: the timer's map came first (the
                    // kernel's map_uid check).
                    if let Some(timer_map) = meta.map.filter(|&m| m != map) {
                        return err(
                            "timer",
                            format!(
                                "timer pointer in R1 map_uid={timer_map} doesn't match map pointer in R{regno} map_uid={map}"
                            ),
                        );
                    }
                    meta.map = Some(map)
                }
                _ => return expect("map_ptr"),
            },
            ArgType::PtrToCtx => {
                if reg.ty != RegType::Ctx {
                    return expect("ctx");
                }
                crate::ctx_rules::check_ctx_unmoved(&reg, regno)?;
            }
            ArgType::PtrToKernelStruct(name) => {
                let is = match reg.ty {
                    RegType::KernelObj { ty } => self
                        .env
                        .kernel_structs
                        .get(usize::from(ty))
                        .is_some_and(|s| s.name == name),
                    _ => false,
                };
                if !is || reg.off != 0 || !reg.val.is_zero() {
                    return err(
                        "bad_helper_arg",
                        format!(
                            "R{regno} type={} expected=ptr_{name} (the object itself, offset 0)",
                            reg.ty.name()
                        ),
                    );
                }
            }
            ArgType::PtrToMapKey | ArgType::PtrToMapValue | ArgType::PtrToUninitMapValue => {
                let Some(map) = meta.map.and_then(|m| self.map(m).cloned()) else {
                    return err(
                        "bad_helper_arg",
                        format!("R{regno}: no map argument before the key/value"),
                    );
                };
                let (size, write, what) = match arg {
                    ArgType::PtrToMapKey => (map.key_size, false, "map key"),
                    ArgType::PtrToMapValue => (map.value_size, false, "map value"),
                    _ => (map.value_size, true, "map value"),
                };
                if map.key_size == 0 && arg == ArgType::PtrToMapKey {
                    // Queue/stack/bloom: the key is unused.
                    return Ok(());
                }
                self.helper_mem(
                    st,
                    pc,
                    &reg,
                    regno,
                    size as u64,
                    size as u64,
                    write,
                    what,
                    meta,
                )?;
                if arg == ArgType::PtrToMapKey && proto.id == 1 {
                    meta.const_key_in_range =
                        self.note_key(st, pc, &reg, meta.map.unwrap_or(0), &map);
                }
            }
            ArgType::PtrToMem { maybe_null, rdonly } => {
                if maybe_null && reg.is_scalar() {
                    self.need_reg(st, regno);
                }
                if maybe_null && reg.is_null_const() {
                    meta.mem = Some((regno, !rdonly, true));
                } else {
                    // The type is checked even when the size turns out to
                    // be zero (the kernel's check_reg_type comes first).
                    if !is_mem_arg(&reg) {
                        return expect(MEM_ARG_TYPES);
                    }
                    meta.mem = Some((regno, !rdonly, false));
                }
            }
            ArgType::PtrToUninitMem => {
                // check_func_arg: a local dynptr wraps a map value only.
                if proto.id == 197 && !matches!(reg.ty, RegType::MapValue { .. }) {
                    return err(
                        "bad_helper_arg",
                        format!(
                            "Unsupported reg type {} for bpf_dynptr_from_mem data (R1 must be \
                             a map value)",
                            reg.ty.name()
                        ),
                    );
                }
                if !is_mem_arg(&reg) {
                    return expect(MEM_ARG_TYPES);
                }
                meta.mem = Some((regno, true, false))
            }
            ArgType::PtrToFixedMem(size) | ArgType::PtrToFixedRdonlyMem(size) => {
                let write = matches!(arg, ArgType::PtrToFixedMem(_));
                if write
                    && matches!(reg.ty, RegType::Stack { .. })
                    && reg.off.rem_euclid(size as i32) != 0
                {
                    return err(
                        "misaligned",
                        format!(
                            "misaligned stack access off {} size {size} (argument {regno} of {})",
                            reg.off, proto.name
                        ),
                    );
                }
                self.helper_mem(
                    st,
                    pc,
                    &reg,
                    regno,
                    size as u64,
                    size as u64,
                    write,
                    "memory",
                    meta,
                )?;
            }
            ArgType::ConstSize | ArgType::ConstSizeOrZero => {
                let Some((mreg, write, null)) = meta.mem.take() else {
                    return err(
                        "bad_helper_arg",
                        format!("R{regno}: size without a memory argument"),
                    );
                };
                if !reg.is_scalar() {
                    return expect("scalar");
                }
                self.need_reg(st, regno);
                let v = reg.val;
                if v.smin < 0 {
                    return err(
                        "bad_size",
                        format!(
                            "R{regno} min value is negative, either use unsigned or 'var &= const'"
                        ),
                    );
                }
                let zero_ok = arg == ArgType::ConstSizeOrZero;
                if v.umin == 0 && !zero_ok {
                    return err(
                        "bad_size",
                        format!(
                            "R{regno} invalid zero-sized read: u64=[{},{}]",
                            v.umin, v.umax
                        ),
                    );
                }
                if v.umax >= MAX_VAR_SIZE {
                    return err(
                        "bad_size",
                        format!("R{regno} unbounded memory access, use 'var &= const' or 'if (var < const)'"),
                    );
                }
                if null {
                    if v.umax != 0 {
                        return err(
                            "bad_size",
                            format!("R{} is NULL but R{regno} size may be non-zero", mreg),
                        );
                    }
                    return Ok(());
                }
                let mem = *st.reg(mreg);
                if !mem.is_init() {
                    return err("uninit_reg", format!("R{mreg} !read_ok"));
                }
                if v.umax == 0 {
                    return Ok(());
                }
                if write && !v.is_const() {
                    // A helper may fill less than the variable size: the
                    // whole buffer must already be initialised.
                    self.helper_mem(
                        st,
                        pc,
                        &mem,
                        mreg,
                        v.umin.max(1),
                        v.umax,
                        false,
                        "memory",
                        meta,
                    )?;
                }
                self.helper_mem(
                    st,
                    pc,
                    &mem,
                    mreg,
                    v.umin.max(1),
                    v.umax,
                    write,
                    "memory",
                    meta,
                )?;
            }
            ArgType::ConstAllocSize => {
                self.need_reg(st, regno);
                let Some(c) = reg.const_value() else {
                    return err(
                        "bad_size",
                        format!(
                            "R{regno} is not a known constant: {} needs a constant size",
                            proto.name
                        ),
                    );
                };
                meta.alloc_size = Some(c);
            }
            ArgType::PtrToStackOrNull => {
                self.need_reg(st, regno);
                if reg.is_null_const() {
                    return Ok(());
                }
                if !matches!(reg.ty, RegType::Stack { .. }) {
                    return expect("fp or NULL");
                }
            }
            ArgType::PtrToFunc => match reg.ty {
                RegType::Func { entry } => meta.callback = Some(entry),
                _ => return expect("func"),
            },
            ArgType::PtrToRingbufMemRelease => match reg.ty {
                RegType::Mem {
                    kind: MemKind::Ringbuf,
                    ..
                } if !reg.maybe_null && reg.ref_id != 0 => {
                    if reg.off != 0 || !reg.val.is_zero() {
                        return err(
                            "bad_release",
                            format!(
                                "R{regno} must have zero offset when passed to release func {}",
                                proto.name
                            ),
                        );
                    }
                    meta.release = Some(reg.ref_id);
                }
                RegType::Mem { .. } if reg.maybe_null => {
                    return err(
                        "bad_helper_arg",
                        format!(
                        "R{regno} type=ringbuf_mem_or_null: null-check the reservation before {}",
                        proto.name
                    ),
                    )
                }
                _ => return expect("ringbuf_mem"),
            },
            ArgType::DynptrUninit(kind) => {
                let (frame, off) = self.check_uninit_dynptr(st, regno, proto.name)?;
                meta.init_dynptr = Some((frame, off, kind));
            }
            ArgType::Dynptr { kind, release } => {
                let d = self.check_init_dynptr(st, regno, kind, release, proto.name)?;
                if release {
                    meta.release = Some(d.ref_id);
                }
                meta.dynptr = Some(d);
            }
            ArgType::PtrToSpinLock => self.check_spin_lock_arg(st, proto.id, &reg, proto.name)?,
            ArgType::PtrToTimer => meta.map = Some(self.check_timer_arg(&reg, regno, proto.name)?),
            ArgType::PtrToConstStr => {
                let RegType::MapValue { map } = reg.ty else {
                    return expect("map_value (read-only string)");
                };
                let Some(spec) = self.map(map) else {
                    return expect("map_value");
                };
                if !(spec.frozen && spec.flags & flags::RDONLY_PROG != 0 && reg.val.is_const()) {
                    return err(
                        "bad_helper_arg",
                        format!("R{regno} does not point to a readonly map'"),
                    );
                }
                if self.const_str(&reg).is_none() {
                    return err("bad_helper_arg", "string is not zero-terminated");
                }
            }
        }
        Ok(())
    }

    /// A memory argument: `[min_size, max_size]` bytes at `reg`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn helper_mem(
        &mut self,
        st: &mut State,
        pc: usize,
        reg: &RegState,
        regno: u8,
        _min_size: u64,
        max_size: u64,
        write: bool,
        what: &str,
        meta: &mut Meta,
    ) -> VResult<()> {
        let size = max_size as i64;
        if reg.maybe_null {
            return err(
                "null_deref",
                format!(
                    "R{regno} type={}_or_null: null-check it before passing it as {what}",
                    reg.ty.name()
                ),
            );
        }
        match reg.ty {
            RegType::Stack { .. } => {
                let frame = match reg.ty {
                    RegType::Stack { frame } => (frame as usize).min(st.frames.len() - 1),
                    _ => 0,
                };
                let access = if write { Access::Write } else { Access::Read };
                let (lo, hi) = self
                    .stack_range(reg, regno, 0, size, access, false)
                    .map_err(|mut e| {
                        e.message = format!(
                            "invalid indirect access to stack R{regno} off={} size={size} ({what})",
                            reg.off
                        );
                        e
                    })?;
                self.note_stack(st, frame, -lo);
                if write {
                    // check_stack_range_initialized: never into a dynptr,
                    // even one the program could overwrite itself.
                    if !st.frames[frame].stack.dynptrs_in(lo, hi).is_empty() {
                        return err(
                            "dynptr_overwrite",
                            format!(
                                "potential write to dynptr at off={} disallowed (R{regno}, \
                                 {what}, writes fp{lo}..fp{hi})",
                                dynptr_start(&st.frames[frame].stack, lo, hi)
                            ),
                        );
                    }
                    meta.clobber.push((frame, lo, hi));
                } else {
                    let allow = self.env.privileged();
                    st.frames[frame]
                        .stack
                        .check_readable(lo, hi, allow, allow)
                        .map_err(|_| {
                            crate::error::VerifyError::new(
                                "uninit_helper_mem",
                                format!(
                                    "invalid indirect read from stack R{regno} off {}..{} ({what}): \
                                     the helper reads bytes that were never written",
                                    lo, hi
                                ),
                            )
                        })?;
                }
                Ok(())
            }
            RegType::Pkt | RegType::PktMeta => self.check_pkt_region(None, reg, regno, 0, size),
            RegType::MapValue { map } => {
                let Some(spec) = self.map(map).cloned() else {
                    return err("bad_map", format!("unknown map #{map}"));
                };
                if write && spec.flags & flags::RDONLY_PROG != 0 {
                    return err(
                        "map_write_rdonly",
                        format!("R{regno}: write into map forbidden ({})", spec.name),
                    );
                }
                if !write && spec.flags & flags::WRONLY_PROG != 0 {
                    return err(
                        "map_read_wronly",
                        format!(
                            "R{regno}: read from map forbidden ({}: write-only for programs)",
                            spec.name
                        ),
                    );
                }
                self.check_lock_overlap(map, reg, 0, size)?;
                self.check_timer_overlap(map, reg, size)?;
                self.check_region(
                    reg,
                    regno,
                    0,
                    size,
                    spec.value_size as i64,
                    &format!(
                        "map value of {} (value_size={})",
                        spec.name, spec.value_size
                    ),
                )
            }
            RegType::Mem { size: limit, kind } => {
                if write && kind.is_rdonly() {
                    return err(
                        "mem_rdonly",
                        format!("R{regno} cannot write into {}", kind.rdonly_what()),
                    );
                }
                self.check_region(reg, regno, 0, size, limit as i64, "mem")
            }
            _ => {
                let _ = pc;
                err(
                    "bad_helper_arg",
                    format!(
                        "R{regno} type={} expected=fp, pkt, pkt_meta, map_value, mem ({what})",
                        type_text(reg)
                    ),
                )
            }
        }
    }

    /// Record a constant-key lookup into an array map; true when the key
    /// is a constant below `max_entries`.
    fn note_key(
        &mut self,
        st: &State,
        pc: usize,
        key: &RegState,
        map: u32,
        spec: &bpfjet_maps::MapSpec,
    ) -> bool {
        if !matches!(spec.map_type, MapType::Array | MapType::PercpuArray) {
            return false;
        }
        let mut value = None;
        if let RegType::Stack { frame } = key.ty {
            if key.val.is_const() {
                let frame = (frame as usize).min(st.frames.len() - 1);
                let off = key.off as i64;
                if (-512..=-4).contains(&off) {
                    let stack = &st.frames[frame].stack;
                    if let Ok(r) = stack.read(off, 4, false) {
                        value = r.const_value().map(|v| v as u32);
                    }
                    // A constant key decides the lookup's nullness and a
                    // fact, so a spilled one must stay that constant on the
                    // paths pruned here (the kernel's get_constant_map_key).
                    // Any other key gives the general answer (maybe NULL, no
                    // fact) whatever its value: no demand, or every path
                    // would keep apart by the key's range.
                    if value.is_some() {
                        if let Some(slot) = stack.fill_source(off, 4) {
                            self.need_slot(frame, slot);
                        }
                    }
                }
            }
        }
        let value = value.filter(|&v| v < spec.max_entries);
        match self.facts.const_key_lookups.get(&pc) {
            // The JIT replaces the key load by the constant: it must be the
            // same key of the same map on every path.
            Some(prev) if prev.key != value || prev.map != map => self.key_conflict.push(pc),
            Some(_) => {}
            None => {
                self.facts
                    .const_key_lookups
                    .insert(pc, ConstKeyLookup { map, key: value });
            }
        }
        value.is_some()
    }

    fn enter_callback(
        &mut self,
        st: &mut State,
        pc: usize,
        helper: i32,
        kind: CallbackKind,
        entry: usize,
        map: Option<u32>,
    ) -> VResult<Succ> {
        if !self.cfg.is_entry(entry) {
            return err(
                "bad_callback",
                format!("callback at insn {entry} is not a subprogram"),
            );
        }
        if st.frames.len() >= MAX_FRAMES {
            return err(
                "call_too_deep",
                format!(
                    "the call stack of {} frames is too deep",
                    st.frames.len() + 1
                ),
            );
        }
        let ctx = *st.reg(3);
        let mut args = [RegState::NOT_INIT; 5];
        match kind {
            CallbackKind::Loop => {
                args[0] = RegState::scalar(Scalar::unsigned_upto(u32::MAX as u64));
                args[1] = ctx;
            }
            CallbackKind::ForEachMapElem => {
                let m = map.unwrap_or(0);
                let key_size = self.map(m).map_or(0, |s| s.key_size);
                args[0] = RegState::pointer(RegType::MapPtr { map: m }, 0);
                args[1] = RegState::pointer(
                    RegType::Mem {
                        size: key_size,
                        kind: MemKind::MapKey,
                    },
                    0,
                );
                args[2] = RegState::pointer(RegType::MapValue { map: m }, 0);
                args[3] = ctx;
            }
            CallbackKind::UserRingbufDrain => {
                let mut sample = RegState::pointer(RegType::ConstDynptr, 0);
                sample.id = self.fresh_id();
                args[0] = sample;
                args[1] = ctx;
            }
            // Verified as a path of its own (check_helper, timer.rs).
            CallbackKind::Timer => {
                return err(
                    "bad_callback",
                    "a timer callback is not entered from its call",
                )
            }
        }
        let info = CallbackInfo {
            helper,
            ret: (0, 1),
            args,
        };
        // The kernel's `callback_depth`: `bpf_loop` runs the callback at
        // most its count's upper bound times, so it enters it again only
        // while fewer iterations were verified on this path. The other
        // helpers may run theirs any number of times: again until the
        // caller's state converges at the call.
        let again = if matches!(kind, CallbackKind::Loop) {
            self.need_reg(st, 1);
            u64::from(st.cur().callback_depth) < st.reg(1).val.umax
        } else {
            true
        };
        Ok(enter_callback_or_return(st, pc, entry, info, again))
    }
}

/// At a call that runs a callback: the path goes on after the call (the
/// callback ran as many times as verified so far, maybe none), and, when
/// `again`, another path enters the callback with the caller's state as
/// it is now, to come back to the call afterwards (the kernel's
/// `push_callback_call`).
pub(crate) fn enter_callback_or_return(
    st: &mut State,
    pc: usize,
    entry: usize,
    info: CallbackInfo,
    again: bool,
) -> Succ {
    let inside = again.then(|| {
        let mut inside = st.clone();
        inside.cur_mut().callback_depth += 1;
        push_callback_frame(&mut inside, pc, entry, info);
        inside
    });
    st.cur_mut().callback_depth = 0;
    finish_call(st, RegState::unknown());
    match inside {
        Some(inside) => Succ::Fork(pc + 1, entry, inside),
        None => Succ::Goto(pc + 1),
    }
}

/// Push a callback frame for another invocation.
pub(crate) fn push_callback_frame(
    st: &mut State,
    callsite: usize,
    entry: usize,
    info: CallbackInfo,
) {
    let mut frame = Frame::new(st.frames.len(), entry, callsite);
    for (i, a) in info.args.iter().enumerate() {
        frame.regs[i + 1] = *a;
    }
    frame.refs_at_entry = st.refs.len();
    frame.callback = Some(info);
    st.frames.push(frame);
}

/// After a call returns to the caller: r1–r5 are clobbered, r0 is the result.
pub(crate) fn finish_call(st: &mut State, r0: RegState) {
    let f = st.cur_mut();
    for r in 1..=5 {
        f.regs[r] = RegState::NOT_INIT;
    }
    f.regs[0] = r0;
}

fn type_text(r: &RegState) -> String {
    if r.maybe_null {
        format!("{}_or_null", r.ty.name())
    } else {
        r.ty.name().to_string()
    }
}

/// What the kernel accepts for a memory argument (`mem_types`).
const MEM_ARG_TYPES: &str = "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem";

/// The lowest stack offset in `[lo, hi)` that belongs to a dynptr.
fn dynptr_start(stack: &crate::stack::Stack, lo: i64, hi: i64) -> i64 {
    (lo..hi)
        .find(|&o| {
            let (s, _) = crate::stack::locate(o);
            stack.slot(s).is_dynptr()
        })
        .unwrap_or(lo)
}

fn is_mem_arg(reg: &RegState) -> bool {
    matches!(
        reg.ty,
        RegType::Stack { .. }
            | RegType::Pkt
            | RegType::PktMeta
            | RegType::MapValue { .. }
            | RegType::Mem { .. }
    )
}
