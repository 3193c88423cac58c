//! Dynptrs at run time: the helpers 197–203 and the kernel's dynptr kfuncs
//! (`bpf_dynptr_from_xdp`, `_slice`, `_slice_rdwr`, `_adjust`, `_is_null`,
//! `_is_rdonly`, `_size`, `_clone`, `_copy`, `_memset`), with the kernel's
//! checks, their order and errnos (kernel/bpf/helpers.c, net/core/filter.c).
//!
//! The program's `struct bpf_dynptr` holds the kernel's `bpf_dynptr_kern`:
//! `u64 data` (the memory; for an XDP dynptr the program's context, whose
//! frame the run environment holds; 0 for the null dynptr), `u32` size
//! (bits 0–23) with the type (bits 28–30) and read-only (bit 31) bits, and
//! `u32 offset` into the memory. The verifier
//! (`bpfjet_verifier::dynptr`) proves the program never touches these bytes
//! itself; bounds-checked runs check every address they lead to.

use super::common::{env, map_arg, require_map_use};
use super::ids;
use super::xdp::frame_arg;
use crate::errno;
use crate::error::{Access, Fault};
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use crate::xdp::XdpFrame;
use bpfjet_maps::{Map, MapType};
use bpfjet_verifier::dynptr_kfunc::DynptrKfunc;

/// `sizeof(struct bpf_dynptr)`.
const DYNPTR_BYTES: u64 = 16;
/// `DYNPTR_MAX_SIZE`, also the size field's mask.
const MAX_SIZE: u32 = 0xff_ffff;
const TYPE_SHIFT: u32 = 28;
const TYPE_MASK: u32 = 0x7;
const RDONLY_BIT: u32 = 1 << 31;
/// The kernel's ERANGE (bpf_dynptr_adjust).
const ERANGE: u64 = 34;

/// `enum bpf_dynptr_type` values bpfjet makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Local = 1,
    Ringbuf = 2,
    Xdp = 4,
}

/// A `struct bpf_dynptr_kern`, read from or written to the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Dynptr {
    data: u64,
    size_word: u32,
    offset: u32,
}

impl Dynptr {
    fn new(data: u64, kind: Kind, size: u32) -> Dynptr {
        Dynptr {
            data,
            size_word: size | (kind as u32) << TYPE_SHIFT,
            offset: 0,
        }
    }

    fn is_null(&self) -> bool {
        self.data == 0
    }

    fn size(&self) -> u32 {
        self.size_word & MAX_SIZE
    }

    fn set_size(&mut self, size: u32) {
        self.size_word = (self.size_word & !MAX_SIZE) | size;
    }

    fn is_rdonly(&self) -> bool {
        self.size_word & RDONLY_BIT != 0
    }

    fn kind(&self) -> Option<Kind> {
        match (self.size_word >> TYPE_SHIFT) & TYPE_MASK {
            1 => Some(Kind::Local),
            2 => Some(Kind::Ringbuf),
            4 => Some(Kind::Xdp),
            _ => None,
        }
    }

    /// `bpf_dynptr_check_off_len`: -E2BIG past the size.
    fn check_off_len(&self, offset: u32, len: u32) -> Result<(), u64> {
        let size = self.size();
        if offset > size || len > size - offset {
            return Err(errno::E2BIG);
        }
        Ok(())
    }

    /// `bpf_dynptr_adjust`'s new view `start..end` of this one: EINVAL for
    /// a null dynptr or `start > end` (checked first, as the kernel does),
    /// ERANGE for either end past the size.
    fn adjusted(mut self, start: u32, end: u32) -> Result<Dynptr, u64> {
        if self.is_null() || start > end {
            return Err(errno::EINVAL);
        }
        if start > self.size() || end > self.size() {
            return Err(ERANGE);
        }
        self.offset = self.offset.wrapping_add(start);
        self.set_size(end - start);
        Ok(self)
    }

    /// The address of byte `offset` of a LOCAL or RINGBUF dynptr's view.
    fn addr(&self, offset: u32) -> u64 {
        self.data + u64::from(self.offset) + u64::from(offset)
    }

    /// The program's 16 bytes of a `struct bpf_dynptr`.
    fn from_bytes(b: &[u8; DYNPTR_BYTES as usize]) -> Dynptr {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Dynptr {
            data: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            size_word: u32_at(8),
            offset: u32_at(12),
        }
    }

    fn to_bytes(self) -> [u8; DYNPTR_BYTES as usize] {
        let mut b = [0u8; DYNPTR_BYTES as usize];
        b[..8].copy_from_slice(&self.data.to_le_bytes());
        b[8..12].copy_from_slice(&self.size_word.to_le_bytes());
        b[12..].copy_from_slice(&self.offset.to_le_bytes());
        b
    }
}

fn load(ctx: &HelperCtx<'_>, at: u64) -> Result<Dynptr, Fault> {
    let b = ctx.read_mem(at, DYNPTR_BYTES)?;
    Ok(Dynptr::from_bytes(b.try_into().expect("16 bytes")))
}

fn store(ctx: &mut HelperCtx<'_>, at: u64, d: Dynptr) -> Result<(), Fault> {
    ctx.write_mem(at, DYNPTR_BYTES)?
        .copy_from_slice(&d.to_bytes());
    Ok(())
}

/// `bpf_dynptr_set_null`.
fn set_null(ctx: &mut HelperCtx<'_>, at: u64) -> Result<(), Fault> {
    store(ctx, at, Dynptr::default())
}

/// `bpf_dynptr_from_mem`'s checks in the kernel's order: the size
/// (E2BIG), then the flags (EINVAL).
fn from_mem_check(size: u32, flags: u64) -> Result<(), u64> {
    if size > MAX_SIZE {
        Err(errno::E2BIG)
    } else if flags != 0 {
        Err(errno::EINVAL)
    } else {
        Ok(())
    }
}

/// An `int` result as the kernel's x86-64 code leaves it in r0 (helpers
/// return `long`: sign-extended; kfuncs `int`: the low 32 bits).
fn int_result(kfunc: bool, r: Result<(), u64>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) if kfunc => u64::from(errno::neg(e) as u32),
        Err(e) => errno::neg(e),
    }
}

/// `__bpf_dynptr_read`: `len` bytes of `src` at `offset` into `dst`.
fn read(
    ctx: &mut HelperCtx<'_>,
    dst: u64,
    src: &Dynptr,
    offset: u32,
    len: u32,
    flags: u64,
) -> Result<Result<(), u64>, Fault> {
    if src.is_null() || flags != 0 {
        return Ok(Err(errno::EINVAL));
    }
    // Checked before the copy buffer is sized by `len`.
    if let Err(e) = src.check_off_len(offset, len) {
        return Ok(Err(e));
    }
    let mut bytes = vec![0u8; len as usize];
    if let Err(e) = read_into(ctx, &mut bytes, src, offset)? {
        return Ok(Err(e));
    }
    // memmove: the source was copied out first, so overlap is harmless.
    ctx.write_mem(dst, u64::from(len))?.copy_from_slice(&bytes);
    Ok(Ok(()))
}

/// `__bpf_dynptr_write`: `bytes` into `dst` at `offset`.
fn write(
    ctx: &mut HelperCtx<'_>,
    dst: &Dynptr,
    offset: u32,
    bytes: &[u8],
    flags: u64,
) -> Result<Result<(), u64>, Fault> {
    if dst.is_null() || dst.is_rdonly() {
        return Ok(Err(errno::EINVAL));
    }
    if let Err(e) = dst.check_off_len(offset, bytes.len() as u32) {
        return Ok(Err(e));
    }
    if flags != 0 {
        return Ok(Err(errno::EINVAL));
    }
    match dst.kind() {
        Some(Kind::Local | Kind::Ringbuf) => {
            ctx.write_mem(dst.addr(offset), bytes.len() as u64)?
                .copy_from_slice(bytes);
            Ok(Ok(()))
        }
        Some(Kind::Xdp) => {
            let frame = frame_arg(ctx, dst.data)?;
            Ok(frame.store_bytes(dst.offset.wrapping_add(offset), bytes))
        }
        None => Ok(Err(errno::EFAULT)),
    }
}

/// `bpf_dynptr_slice` (`rdwr`: `bpf_dynptr_slice_rdwr`): a pointer to `len`
/// bytes of the view at `offset`, or `buffer` filled with them for an XDP
/// range that crosses fragments, or NULL. As in the kernel, a copy in
/// `buffer` is not written back to the frame: a program that changes it
/// commits the bytes with `bpf_dynptr_write`.
fn slice(
    ctx: &mut HelperCtx<'_>,
    d: &Dynptr,
    offset: u32,
    buffer: u64,
    len: u32,
    rdwr: bool,
) -> Result<u64, Fault> {
    if d.is_null() || (rdwr && d.is_rdonly()) || d.check_off_len(offset, len).is_err() {
        return Ok(0);
    }
    let region = |p: u64| {
        if rdwr {
            Region::writable(p, u64::from(len))
        } else {
            Region::read_only(p, u64::from(len))
        }
    };
    match d.kind() {
        Some(Kind::Local | Kind::Ringbuf) => {
            // Already inside a registered region (a map value, the stack, a
            // live ring-buffer sample); bounds-checked runs make sure.
            let access = if rdwr { Access::Write } else { Access::Read };
            ctx.check_mem(d.addr(offset), u64::from(len), access)?;
            Ok(d.addr(offset))
        }
        Some(Kind::Xdp) => {
            if buffer != 0 {
                ctx.check_mem(buffer, u64::from(len), Access::Write)?;
            }
            let frame = frame_arg(ctx, d.data)?;
            let p = xdp_slice(frame, d, offset, buffer, len);
            if p != 0 && p != buffer {
                ctx.register_region(region(p));
            }
            Ok(p)
        }
        None => Ok(0),
    }
}

/// `bpf_dynptr_adjust(d, start, end)`, `_is_null`, `_is_rdonly` and
/// `_size` on the dynptr `d`: r0, and for a successful adjust the new
/// dynptr to store.
fn query(k: DynptrKfunc, d: Dynptr, start: u32, end: u32) -> (u64, Option<Dynptr>) {
    match k {
        DynptrKfunc::Adjust => match d.adjusted(start, end) {
            Ok(d) => (0, Some(d)),
            Err(e) => (int_result(true, Err(e)), None),
        },
        DynptrKfunc::IsNull => (u64::from(d.is_null()), None),
        DynptrKfunc::IsRdonly => (u64::from(!d.is_null() && d.is_rdonly()), None),
        DynptrKfunc::Size if d.is_null() => (int_result(true, Err(errno::EINVAL)), None),
        DynptrKfunc::Size => (u64::from(d.size()), None),
        _ => (0, None),
    }
}

/// The slice of an XDP dynptr `d` (checked against its view already): a
/// pointer into the frame, or `buffer` filled as `bpf_xdp_copy_buf` fills
/// it for a range across fragments (`buffer` writable for `len` bytes, or
/// 0), or 0.
fn xdp_slice(frame: &mut XdpFrame, d: &Dynptr, offset: u32, buffer: u64, len: u32) -> u64 {
    let at = d.offset.wrapping_add(offset);
    match frame.pointer(at, len) {
        Ok(Some(p)) => p as u64,
        _ if buffer != 0 => {
            let bytes = frame.gather_available(at as usize, len as usize);
            // SAFETY: the caller checked (or the verifier proved) `len`
            // writable bytes at `buffer`; `bytes` holds at most `len`.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer as *mut u8, bytes.len())
            };
            buffer
        }
        _ => 0,
    }
}

/// `bpf_dynptr_from_xdp` and `bpf_dynptr_slice(_rdwr)` for an engine that
/// calls them directly (the JIT's code, no trampoline) on a run of a
/// verified program: its pointer arguments are valid by proof. Same
/// results as the kfuncs above; `Err` when `md` (or an XDP dynptr's
/// context) is not the run's context, which the verifier rules out.
pub mod direct {
    use super::{int_result, xdp_slice, Dynptr, Kind, DYNPTR_BYTES, MAX_SIZE};
    use crate::env::XdpEnv;
    use crate::errno;
    pub use bpfjet_verifier::dynptr_kfunc::DynptrKfunc;

    const NOT_THE_CONTEXT: &str = "the first argument is not the XDP context";

    /// # Safety
    /// `at` points to 16 writable bytes.
    unsafe fn store(at: u64, d: Dynptr) {
        // SAFETY: per the contract above; any alignment.
        unsafe { (at as *mut [u8; DYNPTR_BYTES as usize]).write_unaligned(d.to_bytes()) };
    }

    /// # Safety
    /// `at` points to 16 readable bytes.
    unsafe fn load(at: u64) -> Dynptr {
        // SAFETY: per the contract above; any alignment.
        Dynptr::from_bytes(&unsafe { (at as *const [u8; DYNPTR_BYTES as usize]).read_unaligned() })
    }

    /// `bpf_dynptr_adjust(at, start, end)`, `_is_null(at)`,
    /// `_is_rdonly(at)` or `_size(at)` (`k`), for any program type.
    ///
    /// # Safety
    /// `at` points to an initialised dynptr of the program.
    pub unsafe fn query(k: DynptrKfunc, at: u64, start: u32, end: u32) -> u64 {
        // SAFETY: per the contract above.
        let (r0, adjusted) = super::query(k, unsafe { load(at) }, start, end);
        if let Some(d) = adjusted {
            // SAFETY: per the contract above (the program's own dynptr).
            unsafe { store(at, d) };
        }
        r0
    }

    /// `bpf_dynptr_read(dst, len, src, offset, flags)` (helper 201) on an
    /// XDP program's run.
    ///
    /// # Safety
    /// `dst` points to `len` writable bytes; `src` to an initialised
    /// dynptr of the program.
    pub unsafe fn read(
        env: &mut XdpEnv,
        dst: u64,
        len: u32,
        src: u64,
        offset: u32,
        flags: u64,
    ) -> Result<u64, &'static str> {
        // SAFETY: per the contract above.
        let d = unsafe { load(src) };
        if d.is_null() || flags != 0 {
            return Ok(int_result(false, Err(errno::EINVAL)));
        }
        if let Err(e) = d.check_off_len(offset, len) {
            return Ok(int_result(false, Err(e)));
        }
        let r = match d.kind() {
            Some(Kind::Local | Kind::Ringbuf) => {
                // SAFETY: per the contract above; `copy` is a memmove (the
                // view may overlap `dst`, as the kernel allows).
                unsafe {
                    std::ptr::copy(d.addr(offset) as *const u8, dst as *mut u8, len as usize)
                };
                Ok(())
            }
            Some(Kind::Xdp) => {
                let frame = env.frame_of(d.data).ok_or(NOT_THE_CONTEXT)?;
                // Through a copy: `dst` may be a slice of this very frame.
                let mut small = [0u8; 64];
                let mut large = Vec::new();
                let out = if len as usize <= small.len() {
                    &mut small[..len as usize]
                } else {
                    large.resize(len as usize, 0);
                    &mut large[..]
                };
                let r = frame.load_bytes(d.offset.wrapping_add(offset), out);
                if r.is_ok() {
                    // SAFETY: per the contract above.
                    unsafe { std::ptr::copy(out.as_ptr(), dst as *mut u8, out.len()) };
                }
                r
            }
            None => Err(errno::EFAULT),
        };
        Ok(int_result(false, r))
    }

    /// `bpf_dynptr_from_xdp(md, flags, at)`.
    ///
    /// # Safety
    /// `at` points to the program's 16-byte `struct bpf_dynptr`.
    pub unsafe fn from_xdp(
        env: &mut XdpEnv,
        md: u64,
        flags: u64,
        at: u64,
    ) -> Result<u64, &'static str> {
        let frame = env.frame_of(md).ok_or(NOT_THE_CONTEXT)?;
        if flags != 0 {
            // SAFETY: per the contract above.
            unsafe { store(at, Dynptr::default()) };
            return Ok(int_result(true, Err(errno::EINVAL)));
        }
        let len = frame.buff_len() as u32;
        // SAFETY: per the contract above.
        unsafe { store(at, Dynptr::new(md, Kind::Xdp, len & MAX_SIZE)) };
        Ok(0)
    }

    /// `bpf_dynptr_slice(at, offset, buffer, len)` (`rdwr`:
    /// `bpf_dynptr_slice_rdwr`).
    ///
    /// # Safety
    /// `at` points to an initialised dynptr of the program; `buffer` is 0
    /// or points to `len` writable bytes.
    pub unsafe fn slice(
        env: &mut XdpEnv,
        at: u64,
        offset: u32,
        buffer: u64,
        len: u32,
        rdwr: bool,
    ) -> Result<u64, &'static str> {
        // SAFETY: per the contract above.
        let d = unsafe { load(at) };
        if d.is_null() || (rdwr && d.is_rdonly()) || d.check_off_len(offset, len).is_err() {
            return Ok(0);
        }
        Ok(match d.kind() {
            Some(Kind::Local | Kind::Ringbuf) => d.addr(offset),
            Some(Kind::Xdp) => {
                let frame = env.frame_of(d.data).ok_or(NOT_THE_CONTEXT)?;
                xdp_slice(frame, &d, offset, buffer, len)
            }
            None => 0,
        })
    }
}

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::DYNPTR_FROM_MEM,
        "dynptr_from_mem",
        |ctx, a| {
            let (data, size, flags, at) = (a[0], a[1] as u32, a[2], a[3]);
            let res = from_mem_check(size, flags);
            match res {
                Ok(()) => store(ctx, at, Dynptr::new(data, Kind::Local, size))?,
                Err(_) => set_null(ctx, at)?,
            }
            Ok(int_result(false, res))
        },
    ));
    r.register(Helper::new(
        ids::RINGBUF_RESERVE_DYNPTR,
        "ringbuf_reserve_dynptr",
        |ctx, a| {
            let (size, flags, at) = (a[1] as u32, a[2], a[3]);
            let map: &Map = map_arg(ctx, a[0])?;
            require_map_use(ctx, map, "ringbuf_reserve_dynptr", &[MapType::Ringbuf])?;
            let res = if flags != 0 {
                Err(errno::EINVAL)
            } else if size > MAX_SIZE {
                Err(errno::E2BIG)
            } else {
                match map.ringbuf_reserve(u64::from(size), 0) {
                    Some(sample) => {
                        let addr = sample as u64;
                        env(ctx)?.reservations.push((addr, u64::from(size)));
                        ctx.register_region(Region::writable(addr, u64::from(size)));
                        store(ctx, at, Dynptr::new(addr, Kind::Ringbuf, size))?;
                        return Ok(0);
                    }
                    None => Err(errno::EINVAL),
                }
            };
            set_null(ctx, at)?;
            Ok(int_result(false, res))
        },
    ));
    for (id, name, discard) in [
        (ids::RINGBUF_SUBMIT_DYNPTR, "ringbuf_submit_dynptr", false),
        (ids::RINGBUF_DISCARD_DYNPTR, "ringbuf_discard_dynptr", true),
    ] {
        r.register(Helper::new(id, name, move |ctx, a| {
            let d = load(ctx, a[0])?;
            if d.is_null() {
                return Ok(0);
            }
            super::ringbuf::commit(ctx, d.data, a[1], discard)?;
            set_null(ctx, a[0])?;
            Ok(0)
        }));
    }
    r.register(Helper::new(ids::DYNPTR_READ, "dynptr_read", |ctx, a| {
        let src = load(ctx, a[2])?;
        let r = read(ctx, a[0], &src, a[3] as u32, a[1] as u32, a[4])?;
        Ok(int_result(false, r))
    }));
    r.register(Helper::new(ids::DYNPTR_WRITE, "dynptr_write", |ctx, a| {
        let dst = load(ctx, a[0])?;
        let bytes = ctx.read_mem(a[2], u64::from(a[3] as u32))?.to_vec();
        let r = write(ctx, &dst, a[1] as u32, &bytes, a[4])?;
        Ok(int_result(false, r))
    }));
    r.register(Helper::new(ids::DYNPTR_DATA, "dynptr_data", |ctx, a| {
        let d = load(ctx, a[0])?;
        let (offset, len) = (a[1] as u32, a[2] as u32);
        if d.is_null() || d.check_off_len(offset, len).is_err() || d.is_rdonly() {
            return Ok(0);
        }
        // XDP dynptrs take bpf_dynptr_slice(_rdwr).
        Ok(match d.kind() {
            Some(Kind::Local | Kind::Ringbuf) => {
                ctx.check_mem(d.addr(offset), u64::from(len), Access::Write)?;
                d.addr(offset)
            }
            _ => 0,
        })
    }));
}

/// Kernel dynptr kfunc `k` as the program's kfunc number `index`.
pub fn kfunc_helper(index: u32, k: DynptrKfunc) -> Helper {
    Helper::new(index, k.name(), move |ctx, a| run_kfunc(ctx, k, a))
}

fn run_kfunc(ctx: &mut HelperCtx<'_>, k: DynptrKfunc, a: [u64; 5]) -> Result<u64, Fault> {
    Ok(match k {
        DynptrKfunc::FromXdp => {
            let (md, flags, at) = (a[0], a[1], a[2]);
            if flags != 0 {
                set_null(ctx, at)?;
                return Ok(int_result(true, Err(errno::EINVAL)));
            }
            let len = frame_arg(ctx, md)?.buff_len() as u32;
            store(ctx, at, Dynptr::new(md, Kind::Xdp, len & MAX_SIZE))?;
            0
        }
        DynptrKfunc::Slice | DynptrKfunc::SliceRdwr => {
            let d = load(ctx, a[0])?;
            slice(
                ctx,
                &d,
                a[1] as u32,
                a[2],
                a[3] as u32,
                k == DynptrKfunc::SliceRdwr,
            )?
        }
        DynptrKfunc::Adjust | DynptrKfunc::IsNull | DynptrKfunc::IsRdonly | DynptrKfunc::Size => {
            let d = load(ctx, a[0])?;
            let (r0, adjusted) = query(k, d, a[1] as u32, a[2] as u32);
            if let Some(d) = adjusted {
                store(ctx, a[0], d)?;
            }
            r0
        }
        DynptrKfunc::Clone => {
            let d = load(ctx, a[0])?;
            if d.is_null() {
                set_null(ctx, a[1])?;
                int_result(true, Err(errno::EINVAL))
            } else {
                store(ctx, a[1], d)?;
                0
            }
        }
        DynptrKfunc::Copy => {
            let (dst, src) = (load(ctx, a[0])?, load(ctx, a[2])?);
            int_result(
                true,
                copy(ctx, &dst, a[1] as u32, &src, a[3] as u32, a[4] as u32)?,
            )
        }
        DynptrKfunc::Memset => {
            let d = load(ctx, a[0])?;
            int_result(true, memset(ctx, &d, a[1] as u32, a[2] as u32, a[3] as u8)?)
        }
    })
}

/// The kernel's chunk for copies through a buffer.
const CHUNK: u32 = 256;

/// `bpf_dynptr_copy`: through direct slices where both views have one,
/// else reads and writes of 256-byte chunks, as the kernel's (so a
/// failure part-way leaves the chunks before it written, as there).
fn copy(
    ctx: &mut HelperCtx<'_>,
    dst: &Dynptr,
    dst_off: u32,
    src: &Dynptr,
    src_off: u32,
    size: u32,
) -> Result<Result<(), u64>, Fault> {
    let src_slice = slice(ctx, src, src_off, 0, size, false)?;
    let dst_slice = slice(ctx, dst, dst_off, 0, size, true)?;
    if src_slice != 0 {
        let bytes = ctx.read_mem(src_slice, u64::from(size))?.to_vec();
        if dst_slice != 0 {
            ctx.write_mem(dst_slice, u64::from(size))?
                .copy_from_slice(&bytes);
            return Ok(Ok(()));
        }
        return write(ctx, dst, dst_off, &bytes, 0);
    }
    if dst_slice != 0 {
        return read(ctx, dst_slice, src, src_off, size, 0);
    }
    if dst.check_off_len(dst_off, size).is_err() || src.check_off_len(src_off, size).is_err() {
        return Ok(Err(errno::E2BIG));
    }
    let mut buf = [0u8; CHUNK as usize];
    let mut off = 0;
    while off < size {
        let n = CHUNK.min(size - off);
        let buf = &mut buf[..n as usize];
        if let Err(e) = read_into(ctx, buf, src, src_off + off)? {
            return Ok(Err(e));
        }
        if let Err(e) = write(ctx, dst, dst_off + off, buf, 0)? {
            return Ok(Err(e));
        }
        off += n;
    }
    Ok(Ok(()))
}

/// `__bpf_dynptr_read` into a buffer of bpfjet's own.
fn read_into(
    ctx: &mut HelperCtx<'_>,
    out: &mut [u8],
    src: &Dynptr,
    offset: u32,
) -> Result<Result<(), u64>, Fault> {
    let len = out.len() as u32;
    if src.is_null() {
        return Ok(Err(errno::EINVAL));
    }
    if let Err(e) = src.check_off_len(offset, len) {
        return Ok(Err(e));
    }
    match src.kind() {
        Some(Kind::Local | Kind::Ringbuf) => {
            out.copy_from_slice(ctx.read_mem(src.addr(offset), u64::from(len))?);
            Ok(Ok(()))
        }
        Some(Kind::Xdp) => {
            let frame = frame_arg(ctx, src.data)?;
            Ok(frame.load_bytes(src.offset.wrapping_add(offset), out))
        }
        None => Ok(Err(errno::EFAULT)),
    }
}

/// `bpf_dynptr_memset`.
fn memset(
    ctx: &mut HelperCtx<'_>,
    d: &Dynptr,
    offset: u32,
    size: u32,
    val: u8,
) -> Result<Result<(), u64>, Fault> {
    let s = slice(ctx, d, offset, 0, size, true)?;
    if s != 0 {
        ctx.write_mem(s, u64::from(size))?.fill(val);
        return Ok(Ok(()));
    }
    if d.is_rdonly() {
        return Ok(Err(errno::EINVAL));
    }
    if let Err(e) = d.check_off_len(offset, size) {
        return Ok(Err(e));
    }
    let chunk = [val; CHUNK as usize];
    let mut off = 0;
    while off < size {
        let n = CHUNK.min(size - off);
        if let Err(e) = write(ctx, d, offset + off, &chunk[..n as usize], 0)? {
            return Ok(Err(e));
        }
        off += n;
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::frame::{XdpFrame, FRAG_SIZE, MAX_LINEAR_PACKET};

    fn local(size: u32) -> Dynptr {
        Dynptr::new(0x1000, Kind::Local, size)
    }

    #[test]
    fn the_size_word_holds_size_type_and_read_only_bit() {
        let d = Dynptr::new(0x1000, Kind::Xdp, 1500);
        assert_eq!(d.size_word, 1500 | 4 << 28);
        assert_eq!(
            (d.size(), d.kind(), d.is_rdonly()),
            (1500, Some(Kind::Xdp), false)
        );
        let r = Dynptr {
            size_word: d.size_word | RDONLY_BIT,
            ..d
        };
        assert!(r.is_rdonly());
        assert_eq!(r.size(), 1500);
        assert!(Dynptr::default().is_null());
        // SKB (3) and unknown types are no kind bpfjet makes.
        assert_eq!(
            Dynptr {
                size_word: 3 << 28,
                ..d
            }
            .kind(),
            None
        );
    }

    #[test]
    fn from_mem_checks_the_size_before_the_flags() {
        assert_eq!(from_mem_check(MAX_SIZE, 0), Ok(()));
        assert_eq!(from_mem_check(0, 0), Ok(()));
        assert_eq!(from_mem_check(MAX_SIZE + 1, 0), Err(errno::E2BIG));
        assert_eq!(from_mem_check(16, 1), Err(errno::EINVAL));
        // Both wrong: the kernel's size check comes first.
        assert_eq!(from_mem_check(MAX_SIZE + 1, 1), Err(errno::E2BIG));
    }

    #[test]
    fn offset_and_length_bounds_are_e2big() {
        let d = local(64);
        assert_eq!(d.check_off_len(0, 64), Ok(()));
        assert_eq!(d.check_off_len(64, 0), Ok(()));
        assert_eq!(d.check_off_len(60, 4), Ok(()));
        assert_eq!(d.check_off_len(61, 4), Err(errno::E2BIG));
        assert_eq!(d.check_off_len(65, 0), Err(errno::E2BIG));
        assert_eq!(d.check_off_len(0, 65), Err(errno::E2BIG));
        // No wrap-around for offsets near u32::MAX.
        assert_eq!(d.check_off_len(u32::MAX, 2), Err(errno::E2BIG));
        assert_eq!(d.check_off_len(2, u32::MAX), Err(errno::E2BIG));
        assert_eq!(Dynptr::default().check_off_len(0, 0), Ok(()));
    }

    #[test]
    fn adjust_checks_in_the_kernels_order() {
        let d = local(64);
        let a = d.adjusted(10, 20).unwrap();
        assert_eq!((a.offset, a.size(), a.kind()), (10, 10, Some(Kind::Local)));
        // Relative to the current view, offsets add up.
        let b = a.adjusted(2, 5).unwrap();
        assert_eq!((b.offset, b.size()), (12, 3));
        assert_eq!(d.adjusted(64, 64).map(|x| x.size()), Ok(0));
        assert_eq!(d.adjusted(0, 65), Err(ERANGE));
        assert_eq!(d.adjusted(65, 65), Err(ERANGE));
        assert_eq!(d.adjusted(30, 20), Err(errno::EINVAL));
        // start > end is EINVAL even when start is past the size too.
        assert_eq!(d.adjusted(100, 50), Err(errno::EINVAL));
        assert_eq!(Dynptr::default().adjusted(0, 0), Err(errno::EINVAL));
        // The read-only bit and the type survive.
        let r = Dynptr {
            size_word: d.size_word | RDONLY_BIT,
            ..d
        };
        let r = r.adjusted(1, 2).unwrap();
        assert!(r.is_rdonly());
        assert_eq!((r.size(), r.kind()), (1, Some(Kind::Local)));
    }

    #[test]
    fn int_results_are_long_for_helpers_and_int_for_kfuncs() {
        assert_eq!(int_result(false, Ok(())), 0);
        assert_eq!(int_result(false, Err(errno::EINVAL)), -22i64 as u64);
        assert_eq!(int_result(true, Err(errno::EINVAL)), 0xffff_ffea);
        assert_eq!(int_result(true, Err(ERANGE)), 0xffff_ffde);
    }

    /// A frame of `len` bytes (byte i = i * 7 + i / 4096) with the kernel
    /// test run's layout: MAX_LINEAR_PACKET linear bytes, then pages.
    fn frame(len: usize) -> (XdpFrame, Vec<u8>) {
        let bytes: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(7) ^ (i / FRAG_SIZE) as u8)
            .collect();
        (XdpFrame::new(&bytes, 1, 0).unwrap(), bytes)
    }

    #[test]
    fn xdp_slices_point_into_one_piece_or_need_the_buffer() {
        let lin = MAX_LINEAR_PACKET as u32;
        let (mut f, bytes) = frame(MAX_LINEAR_PACKET + 2 * FRAG_SIZE + 100);
        assert_eq!(f.buff_len(), bytes.len());
        let at = |f: &mut XdpFrame, off: u32, len: u32| {
            f.pointer(off, len).map(|p| {
                // SAFETY: `pointer` hands out `len` bytes of the frame.
                p.map(|p| unsafe { std::slice::from_raw_parts(p, len as usize) }.to_vec())
            })
        };
        let want =
            |off: u32, len: u32| Ok(Some(bytes[off as usize..(off + len) as usize].to_vec()));
        // Inside the linear part, to its very end.
        assert_eq!(at(&mut f, 0, 14), want(0, 14));
        assert_eq!(at(&mut f, lin - 4, 4), want(lin - 4, 4));
        // Across the linear part's end and across a page border: no pointer.
        assert_eq!(at(&mut f, lin - 4, 8), Ok(None));
        let page2 = lin + FRAG_SIZE as u32;
        assert_eq!(at(&mut f, page2 - 1, 2), Ok(None));
        // Inside the first and the last fragment.
        assert_eq!(at(&mut f, lin, 20), want(lin, 20));
        let last = page2 + FRAG_SIZE as u32;
        assert_eq!(at(&mut f, last + 90, 10), want(last + 90, 10));
        // Past the frame EINVAL, past 0xffff EFAULT (bpf_xdp_pointer).
        assert_eq!(at(&mut f, last + 90, 11), Err(errno::EINVAL));
        assert_eq!(at(&mut f, 0x1_0000, 1), Err(errno::EFAULT));
        // What the buffer gets: the bytes across the borders.
        assert_eq!(
            f.gather_available((lin - 4) as usize, 8),
            bytes[lin as usize - 4..lin as usize + 4]
        );
        // A range past the end: what there is (bpf_xdp_copy_buf's walk).
        let end = bytes.len();
        assert_eq!(f.gather_available(end - 3, 8), bytes[end - 3..]);
    }

    #[test]
    fn xdp_reads_and_writes_cross_fragments() {
        let lin = MAX_LINEAR_PACKET;
        let (mut f, mut bytes) = frame(lin + FRAG_SIZE + 10);
        let mut out = [0u8; 32];
        f.load_bytes((lin - 16) as u32, &mut out).unwrap();
        assert_eq!(out[..], bytes[lin - 16..lin + 16]);
        let page = lin + FRAG_SIZE;
        f.store_bytes((page - 5) as u32, &[0xab; 10]).unwrap();
        bytes[page - 5..page + 5].fill(0xab);
        assert_eq!(f.gather(0, bytes.len()), bytes);
        assert_eq!(
            f.load_bytes((page + 5) as u32, &mut out[..6]),
            Err(errno::EINVAL)
        );
        assert_eq!(f.store_bytes(0x1_0000, &[1]), Err(errno::EFAULT));
    }
}
