//! Objects of a kfunc library's own types ("module" types, after the
//! kernel modules that define them: eNetSTL's node containers and nodes),
//! as the kernel's verifier treats a module's BTF-typed pointers
//! (`PTR_TO_BTF_ID` of module BTF) with `KF_ACQUIRE`/`KF_RELEASE` kfuncs and
//! referenced `__kptr` fields:
//!
//! - A library kfunc returning `KfuncRet::Module` gives a pointer to the
//!   type (`RegType::Module`), a held reference when it is `acquire`
//!   (released before exit, or moved into a `__kptr`), NULL until checked
//!   when `ret_null`.
//! - A `KfuncArg::Module` argument takes a referenced, non-NULL pointer of
//!   that type at offset 0 — the only pointers of these types a program
//!   can have, so no pointer is forged; with `release` the reference ends
//!   and every copy becomes an unknown scalar.
//! - Loads through such a pointer read only the fields the library
//!   exposes (`ModuleField::readable`: node data, a handle's fd), at a
//!   constant offset; anything else — its links, refcount, owner — is
//!   refused naming the field. Stores are refused: the library changes its
//!   objects only through its kfuncs (the kernel refuses stores through
//!   module pointers too).
//! - A map value's `__kptr` whose struct has a library type's name holds
//!   that type: `bpf_kptr_xchg` moves a reference of that type in and out
//!   with the ownership rules of `bpf_obj_new` objects. The program's own
//!   declaration of the struct must agree with the library's layout for
//!   every member it declares (name, offset, size).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::{RefInfo, State};
use crate::helper_check::{finish_call, Meta};
use crate::proto::KfuncProto;
use crate::reg_state::{RegState, RegType};
use bpfjet_obj::BtfType;

/// One field of a library type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleField {
    pub name: &'static str,
    pub off: u32,
    pub size: u32,
    /// Programs may load from it (never store).
    pub readable: bool,
}

/// An object type a kfunc library defines, by its C struct name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleType {
    pub name: &'static str,
    pub size: u32,
    pub fields: &'static [ModuleField],
}

impl ModuleType {
    fn readable_names(&self) -> String {
        let names: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.readable)
            .map(|f| f.name)
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

impl Verifier<'_> {
    fn module_index(&self, name: &str) -> Option<u8> {
        self.env
            .module_types
            .iter()
            .position(|t| t.name == name)
            .and_then(|i| u8::try_from(i).ok())
    }

    fn module_type(&self, ty: u8) -> Option<&ModuleType> {
        self.env.module_types.get(usize::from(ty))
    }

    fn module_name(&self, ty: u8) -> &'static str {
        self.module_type(ty).map_or("?", |t| t.name)
    }

    /// Argument `regno` of kfunc `proto`: a referenced pointer to `ty` at
    /// offset 0; with `release` the call ends the reference.
    pub(crate) fn check_module_arg(
        &self,
        st: &State,
        regno: u8,
        ty: &str,
        release: bool,
        proto: &KfuncProto,
        meta: &mut Meta,
    ) -> VResult<()> {
        let name = proto.name;
        let reg = *st.reg(regno);
        let what = format!("argument {regno} of kfunc {name}");
        let RegType::Module { ty: got } = reg.ty else {
            return err(
                "bad_kfunc_arg",
                format!(
                    "R{regno} type={} expected=ptr_{ty} ({what}: a pointer the library \
                     handed out)",
                    reg.ty.name()
                ),
            );
        };
        if self.module_name(got) != ty {
            return err(
                "bad_kfunc_arg",
                format!(
                    "R{regno} is a pointer to struct {} but {what} is a struct {ty}",
                    self.module_name(got)
                ),
            );
        }
        if reg.maybe_null {
            return err(
                "null_deref",
                format!("R{regno} may be NULL: null-check it before passing it as {what}"),
            );
        }
        if reg.ref_id == 0 {
            return err(
                "bad_kfunc_arg",
                format!("R{regno} must be referenced ({what})"),
            );
        }
        if reg.off != 0 || !reg.val.is_zero() {
            return err(
                "bad_kfunc_arg",
                format!(
                    "R{regno} must have zero offset when passed as {what} (off {})",
                    reg.off
                ),
            );
        }
        if release {
            meta.release = Some(reg.ref_id);
        }
        Ok(())
    }

    /// The result of a kfunc returning a library object.
    pub(crate) fn module_result(
        &mut self,
        st: &mut State,
        pc: usize,
        ty: &str,
        proto: &KfuncProto,
    ) -> VResult<RegState> {
        let Some(idx) = self.module_index(ty) else {
            return err(
                "bad_kfunc_proto",
                format!(
                    "kfunc {} returns struct {ty}, which no library type of this \
                     environment describes",
                    proto.name
                ),
            );
        };
        Ok(self.module_pointer(st, pc, idx, proto.flags.ret_null, proto.flags.acquire))
    }

    fn module_pointer(
        &mut self,
        st: &mut State,
        pc: usize,
        ty: u8,
        maybe_null: bool,
        acquire: bool,
    ) -> RegState {
        let id = self.fresh_id();
        let mut r = RegState::pointer(RegType::Module { ty }, 0);
        r.maybe_null = maybe_null;
        r.id = id;
        if acquire {
            r.ref_id = id;
            st.refs.push(RefInfo { id, pc });
        }
        r
    }

    /// A load (or store) of `size` bytes at `off` past a library object.
    pub(crate) fn check_module_access(
        &self,
        base: &RegState,
        regno: u8,
        ty: u8,
        off: i64,
        size: i64,
        write: bool,
    ) -> VResult<()> {
        let Some(t) = self.module_type(ty) else {
            return err("module_access", format!("R{regno} names no library type"));
        };
        if write {
            return err(
                "module_access",
                format!(
                    "R{regno} stores into struct {}: the library's objects are read-only \
                     to programs (its kfuncs write them)",
                    t.name
                ),
            );
        }
        let (start, end) =
            crate::tp_btf::object_range(base, regno, off, size, t.name, t.size, "module_access")?;
        let inside = |f: &ModuleField| {
            start >= i64::from(f.off) && end <= i64::from(f.off) + i64::from(f.size)
        };
        if t.fields.iter().any(|f| f.readable && inside(f)) {
            return Ok(());
        }
        let hit = t
            .fields
            .iter()
            .find(|f| start < i64::from(f.off + f.size) && i64::from(f.off) < end);
        err(
            "module_access",
            match hit {
                Some(f) if !f.readable => format!(
                    "R{regno} reads {}.{} (off {start} size {size}): the library does not \
                     expose this field to programs (readable: {})",
                    t.name,
                    f.name,
                    t.readable_names()
                ),
                _ => format!(
                    "R{regno} reads struct {} at off {start} size {size}, which is not inside \
                     one readable field (readable: {})",
                    t.name,
                    t.readable_names()
                ),
            },
        )
    }

    /// The library type a `__kptr` to program BTF struct `target` holds,
    /// if its name is one; the program's declaration must agree with the
    /// library's layout.
    pub(crate) fn module_kptr_type(&self, target: u32, off: i64) -> VResult<Option<u8>> {
        let Some(btf) = self.env.btf else {
            return Ok(None);
        };
        let Some(t) = btf.type_by_id(target) else {
            return Ok(None);
        };
        let Some(idx) = self.module_index(t.name()) else {
            return Ok(None);
        };
        let lib = self.module_type(idx).copied().unwrap_or(ModuleType {
            name: "",
            size: 0,
            fields: &[],
        });
        if let BtfType::Struct {
            name,
            size,
            members,
        } = t
        {
            if *size > lib.size {
                return err(
                    "kptr_layout",
                    format!(
                        "the kptr at off={off} holds struct {name}, which the program declares \
                         with {size} bytes; the library's is {} bytes",
                        lib.size
                    ),
                );
            }
            for m in members {
                let at = m.bit_offset / 8;
                let bytes = btf.size_of(m.type_id).unwrap_or(0);
                let same = lib.fields.iter().any(|f| {
                    f.name == m.name
                        && f.off == at
                        && u64::from(f.size) == bytes
                        && m.bit_offset % 8 == 0
                });
                if !same {
                    return err(
                        "kptr_layout",
                        format!(
                            "struct {name} (held by the kptr at off={off}) declares member {} at \
                             off {at} size {bytes}, unlike the library's struct {name}",
                            if m.name.is_empty() {
                                "(anonymous)"
                            } else {
                                &m.name
                            }
                        ),
                    );
                }
            }
        }
        Ok(Some(idx))
    }

    /// `bpf_kptr_xchg` on a kptr holding library type `ty`: R2 is NULL or
    /// a referenced pointer to that type at offset 0 (its reference moves
    /// into the map); the old object comes out as a reference, or NULL.
    pub(crate) fn module_kptr_xchg(
        &mut self,
        st: &mut State,
        pc: usize,
        off: i64,
        ty: u8,
    ) -> VResult<Succ> {
        let want = self.module_name(ty);
        let src = *st.reg(2);
        if src.is_null_const() {
            self.need_reg(st, 2);
        } else {
            let got = match src.ty {
                RegType::Module { ty: got } => format!("struct {}", self.module_name(got)),
                RegType::Alloc { .. } => "a bpf_obj_new object".to_string(),
                other => other.name().to_string(),
            };
            if src.ty != (RegType::Module { ty }) {
                return err(
                    "kptr_xchg",
                    format!(
                        "R2 is {got} but the kptr at off={off} holds struct {want} \
                         (argument 2 of bpf_kptr_xchg)"
                    ),
                );
            }
            if src.maybe_null {
                return err(
                    "null_deref",
                    "R2 may be NULL: null-check the object before bpf_kptr_xchg",
                );
            }
            if src.ref_id == 0 {
                return err(
                    "kptr_xchg",
                    "R2 must be referenced: bpf_kptr_xchg takes a reference",
                );
            }
            if src.off != 0 || !src.val.is_zero() {
                return err(
                    "kptr_xchg",
                    format!(
                        "R2 must point to the start of struct {want} (off {})",
                        src.off
                    ),
                );
            }
            let ref_id = src.ref_id;
            st.refs.retain(|r| r.id != ref_id);
            st.for_each_reg(|r| {
                if r.ref_id == ref_id {
                    *r = RegState::unknown();
                }
            });
        }
        let r0 = self.module_pointer(st, pc, ty, true, true);
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }
}
