//! `tp_btf` programs (`BPF_PROG_TYPE_TRACING`, `BPF_TRACE_RAW_TP`): their
//! context is the tracepoint's arguments, one `u64` each, typed by the
//! kernel's BTF (`VerifyEnv::tp_args`, from `bpfjet_obj::TpBtfProto`), as
//! the kernel's `btf_ctx_access` types them:
//!
//! - a load of argument `i` is at offset `8 * i`, of an argument the
//!   tracepoint has; read-only;
//! - an argument pointing to a kernel struct loads as a non-NULL pointer
//!   to that object (the kernel's trusted `PTR_TO_BTF_ID`), any other as
//!   a scalar; pointers are loaded whole (8 bytes), integers in any size;
//! - through such a pointer a program reads the fields bpfjet fills, at
//!   a constant offset ([`bpfjet_obj::tp_btf::FILLED`]: a device's
//!   `ifindex` and `name`, ...); any other byte is refused naming the
//!   struct and the readable fields, where the kernel would read its own
//!   memory. Stores are refused, as the kernel refuses stores through
//!   `PTR_TO_BTF_ID` outside a few struct_ops.

use crate::driver::Verifier;
use crate::error::{err, VResult};
use crate::range::Scalar;
use crate::reg_state::{RegState, RegType};
use bpfjet_obj::TpArg;

impl Verifier<'_> {
    /// A load from a `tp_btf` context: the register it gives and the end
    /// of the bytes read.
    pub(crate) fn tp_btf_ctx_load(
        &self,
        base: &RegState,
        regno: u8,
        off: i16,
        size: usize,
        write: bool,
    ) -> VResult<(RegState, u64)> {
        crate::ctx_rules::check_ctx_unmoved(base, regno)?;
        let off = i64::from(off);
        if write {
            return err(
                "ctx_write",
                format!(
                    "invalid bpf_context access off={off} size={size}: a tracepoint's \
                     arguments are read-only"
                ),
            );
        }
        // The kernel's btf_ctx_access messages, then its verdict.
        let func = self.env.tp_name;
        let refuse = |why: String| {
            err(
                "ctx_bad_access",
                format!("func '{func}' {why}; invalid bpf_context access off={off} size={size}"),
            )
        };
        if off < 0 || off % 8 != 0 {
            return refuse(format!("offset {off} is not multiple of 8"));
        }
        let idx = (off / 8) as usize;
        let Some(arg) = self.env.tp_args.get(idx) else {
            return refuse(format!("doesn't have {}-th argument", idx + 1));
        };
        let end = (off + size as i64) as u64;
        match arg {
            TpArg::Scalar => Ok((
                RegState::scalar(crate::stack::truncate(&Scalar::UNKNOWN, size)),
                end,
            )),
            TpArg::Object(ty) if size == 8 => {
                Ok((RegState::pointer(RegType::KernelObj { ty: *ty }, 0), end))
            }
            TpArg::OpaquePointer if size == 8 => Ok((RegState::scalar(Scalar::UNKNOWN), end)),
            TpArg::Object(_) | TpArg::OpaquePointer => refuse(format!("size {size} must be 8")),
        }
    }

    /// A load (or store) of `size` bytes at `off` past a kernel object of
    /// struct `ty`: the register loaded (a filled pointer field read whole
    /// is a pointer to its object).
    pub(crate) fn kernel_obj_load(
        &self,
        base: &RegState,
        regno: u8,
        ty: u8,
        off: i64,
        size: i64,
        write: bool,
    ) -> VResult<RegState> {
        let Some(s) = self.env.kernel_structs.get(usize::from(ty)) else {
            return err(
                "kernel_obj_access",
                format!("R{regno} names no kernel object"),
            );
        };
        if write {
            return err(
                "kernel_obj_access",
                format!(
                    "R{regno} stores into struct {}: only read is supported",
                    s.name
                ),
            );
        }
        let (start, end) =
            object_range(base, regno, off, size, &s.name, s.size, "kernel_obj_access")?;
        let field = s
            .fields
            .iter()
            .find(|f| start >= i64::from(f.off) && end <= i64::from(f.off) + i64::from(f.size));
        match field {
            Some(f) => Ok(match f.object {
                Some(ty) if start == i64::from(f.off) && size == 8 => {
                    RegState::pointer(RegType::KernelObj { ty }, 0)
                }
                _ => RegState::scalar(crate::stack::truncate(&Scalar::UNKNOWN, size as usize)),
            }),
            None => err(
                "kernel_obj_access",
                format!(
                    "R{regno} reads struct {} at off {start} size {size}: bpfjet fills only \
                     {} of it (a userspace data plane has no kernel object behind the rest)",
                    s.name,
                    s.field_names()
                ),
            ),
        }
    }
}

/// The bytes `[start, end)` a load of `size` at `off` past `base` reads of
/// an object of struct `name` (`struct_size` bytes): the offset constant,
/// the bytes inside the struct (else refused under `rule`).
pub(crate) fn object_range(
    base: &RegState,
    regno: u8,
    off: i64,
    size: i64,
    name: &str,
    struct_size: u32,
    rule: &'static str,
) -> VResult<(i64, i64)> {
    let Some(c) = base.val.as_const() else {
        return err(
            rule,
            format!("R{regno} is ptr_{name} invalid variable offset"),
        );
    };
    let start = i64::from(base.off) + c as i64 + off;
    let end = start + size;
    if start < 0 || end > i64::from(struct_size) {
        return err(
            rule,
            format!(
                "access beyond struct {name} at off {start} size {size} (the struct is \
                 {struct_size} bytes)"
            ),
        );
    }
    Ok((start, end))
}
