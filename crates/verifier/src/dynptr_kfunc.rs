//! The kernel's dynptr kfuncs (`bpf_dynptr_from_xdp`, `bpf_dynptr_slice`,
//! `bpf_dynptr_slice_rdwr`, `bpf_dynptr_adjust`, `bpf_dynptr_is_null`,
//! `bpf_dynptr_is_rdonly`, `bpf_dynptr_size`, `bpf_dynptr_clone`,
//! `bpf_dynptr_copy`, `bpf_dynptr_memset`), checked
//! as the kernel's `check_kfunc_args` checks their BTF-typed arguments:
//! `struct bpf_dynptr *ptr__uninit` / `clone__uninit` become a dynptr,
//! `const struct bpf_dynptr *` must be an initialised one, `buffer__opt`
//! is NULL or memory of the constant `buffer__szk` bytes.

use crate::driver::{Succ, Verifier};
use crate::env::ProgType;
use crate::error::{err, VResult};
use crate::frame::State;
use crate::helper_check::{finish_call, Meta};
use crate::reg_state::{DynptrKind, RegState, RegType};

/// One of the kernel's dynptr kfuncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynptrKfunc {
    FromXdp,
    Slice,
    SliceRdwr,
    Adjust,
    IsNull,
    IsRdonly,
    Size,
    Clone,
    Copy,
    Memset,
}

impl DynptrKfunc {
    pub fn from_name(name: &str) -> Option<DynptrKfunc> {
        Some(match name {
            "bpf_dynptr_from_xdp" => DynptrKfunc::FromXdp,
            "bpf_dynptr_slice" => DynptrKfunc::Slice,
            "bpf_dynptr_slice_rdwr" => DynptrKfunc::SliceRdwr,
            "bpf_dynptr_adjust" => DynptrKfunc::Adjust,
            "bpf_dynptr_is_null" => DynptrKfunc::IsNull,
            "bpf_dynptr_is_rdonly" => DynptrKfunc::IsRdonly,
            "bpf_dynptr_size" => DynptrKfunc::Size,
            "bpf_dynptr_clone" => DynptrKfunc::Clone,
            "bpf_dynptr_copy" => DynptrKfunc::Copy,
            "bpf_dynptr_memset" => DynptrKfunc::Memset,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DynptrKfunc::FromXdp => "bpf_dynptr_from_xdp",
            DynptrKfunc::Slice => "bpf_dynptr_slice",
            DynptrKfunc::SliceRdwr => "bpf_dynptr_slice_rdwr",
            DynptrKfunc::Adjust => "bpf_dynptr_adjust",
            DynptrKfunc::IsNull => "bpf_dynptr_is_null",
            DynptrKfunc::IsRdonly => "bpf_dynptr_is_rdonly",
            DynptrKfunc::Size => "bpf_dynptr_size",
            DynptrKfunc::Clone => "bpf_dynptr_clone",
            DynptrKfunc::Copy => "bpf_dynptr_copy",
            DynptrKfunc::Memset => "bpf_dynptr_memset",
        }
    }

    /// Registers holding scalar arguments.
    fn scalars(self) -> &'static [u8] {
        match self {
            DynptrKfunc::FromXdp => &[2],
            DynptrKfunc::Slice | DynptrKfunc::SliceRdwr => &[2],
            DynptrKfunc::Adjust => &[2, 3],
            DynptrKfunc::Copy => &[2, 4, 5],
            DynptrKfunc::Memset => &[2, 3, 4],
            _ => &[],
        }
    }
}

impl Verifier<'_> {
    pub(crate) fn check_dynptr_kfunc(
        &mut self,
        st: &mut State,
        pc: usize,
        k: DynptrKfunc,
    ) -> VResult<Succ> {
        let name = k.name();
        if k == DynptrKfunc::FromXdp && self.env.prog_type != ProgType::Xdp {
            return err(
                "unknown_kfunc",
                format!(
                    "calling kernel function {name} is not allowed: it is for XDP programs \
                     (program type {})",
                    self.env.prog_type
                ),
            );
        }
        crate::kfunc::scalar_kfunc_args(st, k.scalars(), name)?;
        let r0 = match k {
            DynptrKfunc::FromXdp => {
                let ctx = *st.reg(1);
                if ctx.ty != RegType::Ctx || ctx.off != 0 || !ctx.val.is_zero() {
                    return err(
                        "bad_kfunc_arg",
                        format!(
                            "arg#0 expected pointer to ctx, but got {} (argument 1 of kfunc \
                             {name}, the unmodified context)",
                            ctx.ty.name()
                        ),
                    );
                }
                let at = self.check_uninit_dynptr(st, 3, name)?;
                self.init_dynptr(st, pc, at, DynptrKind::Xdp);
                RegState::unknown()
            }
            DynptrKfunc::Clone => {
                let src = self.check_init_dynptr(st, 1, None, false, name)?;
                let at = self.check_uninit_dynptr(st, 2, name)?;
                let RegType::Dynptr { kind, .. } = src.ty else {
                    unreachable!("check_init_dynptr returns a dynptr")
                };
                // The clone shares the reference (releasing either releases
                // both), not the identity (its slices are its own).
                let mut d = RegState::pointer(RegType::Dynptr { kind, first: true }, 0);
                d.id = self.fresh_id();
                d.ref_id = src.ref_id;
                st.frames[at.0].stack.set_dynptr(at.1, d);
                RegState::unknown()
            }
            DynptrKfunc::Slice | DynptrKfunc::SliceRdwr => {
                let d = self.check_init_dynptr(st, 1, None, false, name)?;
                let size_reg = *st.reg(4);
                self.need_reg(st, 4);
                let Some(size) = size_reg.const_value().filter(|_| size_reg.is_init()) else {
                    return err(
                        "bad_size",
                        format!(
                            "R4 must be a known constant: buffer__szk of {name} sizes the \
                             slice returned"
                        ),
                    );
                };
                let buf = *st.reg(3);
                if !buf.is_init() {
                    return err(
                        "uninit_reg",
                        format!("R3 !read_ok: argument 3 of kfunc {name} is not set"),
                    );
                }
                if !buf.is_null_const() {
                    // The buffer is read and written (the kernel checks
                    // both) when the range is not contiguous.
                    let what = format!("buffer__opt of kfunc {name}");
                    let mut meta = Meta::default();
                    self.helper_mem(st, pc, &buf, 3, size, size, false, &what, &mut meta)?;
                    self.helper_mem(st, pc, &buf, 3, size, size, true, &what, &mut meta)?;
                    self.apply_write_and_release(st, &mut meta);
                }
                let size = u32::try_from(size).map_err(|_| {
                    crate::error::VerifyError::new(
                        "bad_size",
                        format!("R4 buffer__szk of {name} is too large ({size})"),
                    )
                })?;
                self.dynptr_slice(&d, size, k == DynptrKfunc::Slice)
            }
            // `struct bpf_dynptr *` (not const): never a const dynptr.
            DynptrKfunc::Copy | DynptrKfunc::Memset => {
                let ptrs: &[u8] = if k == DynptrKfunc::Copy {
                    &[1, 3]
                } else {
                    &[1]
                };
                for &r in ptrs {
                    if st.reg(r).ty == RegType::ConstDynptr {
                        return err(
                            "bad_kfunc_arg",
                            format!(
                                "cannot pass pointer to const bpf_dynptr, the helper mutates it \
                                 (R{r} of {name})"
                            ),
                        );
                    }
                    self.check_init_dynptr(st, r, None, false, name)?;
                }
                RegState::unknown()
            }
            // Scalar results are unknown 64-bit values to the kernel's
            // verifier whatever their C type (bool, __u32): so here.
            DynptrKfunc::Adjust
            | DynptrKfunc::IsNull
            | DynptrKfunc::IsRdonly
            | DynptrKfunc::Size => {
                self.check_init_dynptr(st, 1, None, false, name)?;
                RegState::unknown()
            }
        };
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }
}
