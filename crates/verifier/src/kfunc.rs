//! Kfunc calls: the callee is named by the object's kfunc table
//! (`VerifyEnv::kfuncs`), its prototype comes from `VerifyEnv::extra_kfuncs`
//! or the built-in table (`proto::kfunc_protos`). Arguments are checked with
//! the helper machinery (context, pointer + size pairs, stack/map/packet
//! memory) plus the kfunc-only kinds (fixed-size out pointers, acquired
//! references released by the call).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::{RefInfo, State};
use crate::helper_check::{finish_call, Meta};
use crate::proto::{ArgType, HelperProto, KfuncArg, KfuncProto, KfuncRet, RetType};
use crate::reg_state::{MemKind, RegState, RegType};

/// Helper id used for kfuncs in messages and the lock check (no helper has it).
const KFUNC_ID: i32 = -1;

/// Registers `regs` of a call of kfunc `name` must be initialised scalars
/// (the fixed-prototype kfuncs: iterators, dynptrs).
pub(crate) fn scalar_kfunc_args(st: &State, regs: &[u8], name: &str) -> VResult<()> {
    for &r in regs {
        let reg = st.reg(r);
        if !reg.is_init() {
            return err(
                "uninit_reg",
                format!("R{r} !read_ok: argument {r} of kfunc {name} is not set"),
            );
        }
        if !reg.is_scalar() {
            return err(
                "bad_kfunc_arg",
                format!(
                    "R{r} is a {} but argument {r} of kfunc {name} is a scalar",
                    reg.ty.name()
                ),
            );
        }
    }
    Ok(())
}

impl Verifier<'_> {
    fn kfunc_by_name(&self, name: &str) -> Option<KfuncProto> {
        self.env
            .extra_kfuncs
            .iter()
            .find(|k| k.name == name)
            .or_else(|| crate::proto::kfunc_proto(name))
            .copied()
    }

    pub(crate) fn check_kfunc(&mut self, st: &mut State, pc: usize, idx: i32) -> VResult<Succ> {
        let Some(name) = usize::try_from(idx)
            .ok()
            .and_then(|i| self.env.kfuncs.get(i))
            .cloned()
        else {
            return err(
                "unknown_kfunc",
                format!("kfunc call #{idx} does not name a kfunc of the object"),
            );
        };
        if let Some(k) = crate::graph::GraphKfunc::from_name(&name) {
            return self.check_graph_kfunc(st, pc, k);
        }
        if let Some(k) = crate::iter::IterKfunc::from_name(&name) {
            return self.check_iter_kfunc(st, pc, k);
        }
        if let Some(k) = crate::dynptr_kfunc::DynptrKfunc::from_name(&name) {
            self.check_call_under_lock(st, KFUNC_ID, k.name())?;
            return self.check_dynptr_kfunc(st, pc, k);
        }
        let Some(proto) = self.kfunc_by_name(&name) else {
            return err(
                "unknown_kfunc",
                format!("kfunc {name} is not known to bpfjet (no prototype for it)"),
            );
        };
        if proto.flags.dev_bound {
            return err(
                "kfunc_dev_bound",
                format!(
                    "kfunc {name}: metadata kfuncs require a device-bound program, \
                     and bpfjet programs are never bound to a device"
                ),
            );
        }
        self.check_call_under_lock(st, KFUNC_ID, proto.name)?;
        // The helper view of the prototype, for the kinds both share.
        let as_helper = HelperProto {
            id: KFUNC_ID,
            name: proto.name,
            args: proto.args.map(|a| match a {
                KfuncArg::Scalar => ArgType::Anything,
                KfuncArg::Ctx => ArgType::PtrToCtx,
                KfuncArg::Mem => ArgType::PtrToMem {
                    maybe_null: false,
                    rdonly: true,
                },
                KfuncArg::MutMem => ArgType::PtrToMem {
                    maybe_null: false,
                    rdonly: false,
                },
                KfuncArg::Size => ArgType::ConstSize,
                _ => ArgType::DontCare,
            }),
            ret: RetType::Integer,
            changes_pkt_data: false,
            pkt_access: true,
            gpl_only: false,
            needs_perfmon: false,
            callback: None,
        };
        let mut meta = Meta::default();
        let mut known_sizes = [0u32; 5];
        for (i, arg) in proto.args.iter().enumerate() {
            let regno = i as u8 + 1;
            let reg = *st.reg(regno);
            match *arg {
                KfuncArg::None => continue,
                _ if !reg.is_init() => {
                    return err(
                        "uninit_reg",
                        format!("R{regno} !read_ok: argument {regno} of kfunc {name} is not set"),
                    )
                }
                KfuncArg::Scalar if !reg.is_scalar() => {
                    return err(
                        "bad_kfunc_arg",
                        format!(
                            "R{regno} is a {} but argument {regno} of kfunc {name} is a scalar",
                            reg.ty.name()
                        ),
                    )
                }
                KfuncArg::Scalar
                | KfuncArg::Ctx
                | KfuncArg::Mem
                | KfuncArg::MutMem
                | KfuncArg::Size => self
                    .check_arg(st, pc, &as_helper, regno, as_helper.args[i], &mut meta)
                    .map_err(|mut e| {
                        // The helper checks speak of registers; say whose.
                        if !e.message.contains(name.as_str()) {
                            e.message = format!("{} (argument {regno} of kfunc {name})", e.message);
                        }
                        e
                    })?,
                KfuncArg::OutMem(size) | KfuncArg::InMem(size) => self.helper_mem(
                    st,
                    pc,
                    &reg,
                    regno,
                    size as u64,
                    size as u64,
                    matches!(*arg, KfuncArg::OutMem(_)),
                    &format!("argument {regno} of kfunc {name}"),
                    &mut meta,
                )?,
                KfuncArg::MapValue => {
                    if !matches!(reg.ty, RegType::MapValue { .. }) || reg.maybe_null {
                        return err(
                            "bad_kfunc_arg",
                            format!(
                                "R{regno} type={}{} expected=map_value (argument {regno} of kfunc {name})",
                                reg.ty.name(),
                                if reg.maybe_null { "_or_null" } else { "" }
                            ),
                        );
                    }
                }
                KfuncArg::Release => {
                    let acquired = matches!(
                        reg.ty,
                        RegType::Mem {
                            kind: MemKind::Helper,
                            ..
                        }
                    ) && reg.ref_id != 0
                        && !reg.maybe_null;
                    if !acquired {
                        return err(
                            "bad_release",
                            format!(
                                "R{regno} must be a non-NULL reference acquired by a kfunc \
                                 (argument {regno} of release kfunc {name})"
                            ),
                        );
                    }
                    if reg.off != 0 || !reg.val.is_zero() {
                        return err(
                            "bad_release",
                            format!(
                                "R{regno} must have zero offset when passed to release func {name}"
                            ),
                        );
                    }
                    meta.release = Some(reg.ref_id);
                }
                KfuncArg::Module { ty, release } => {
                    self.check_module_arg(st, regno, ty, release, &proto, &mut meta)?
                }
                KfuncArg::KnownSize => {
                    let size = reg.const_value().filter(|_| reg.is_scalar());
                    match size {
                        Some(v) if (1..=crate::proto::MAX_KNOWN_SIZE).contains(&v) => {
                            // The returned memory's size depends on it.
                            self.need_reg(st, regno);
                            known_sizes[i] = v as u32;
                        }
                        _ => {
                            return err(
                                "bad_kfunc_arg",
                                format!(
                                    "R{regno} must be a known constant in [1, {}]: argument \
                                     {regno} of kfunc {name} is the size of the memory it \
                                     returns (R{regno} is {})",
                                    crate::proto::MAX_KNOWN_SIZE,
                                    if reg.is_scalar() {
                                        format!("{:?}", reg.val)
                                    } else {
                                        format!("a {}", reg.ty.name())
                                    }
                                ),
                            );
                        }
                    }
                }
            }
        }
        self.apply_write_and_release(st, &mut meta);
        let r0 = match proto.ret {
            KfuncRet::Integer => RegState::unknown(),
            KfuncRet::Void => RegState::NOT_INIT,
            KfuncRet::Module(ty) => self.module_result(st, pc, ty, &proto)?,
            KfuncRet::Mem(_) | KfuncRet::MemOfArgSize(_) => {
                let size = match proto.ret {
                    KfuncRet::MemOfArgSize(n) => {
                        match known_sizes.get(usize::from(n).wrapping_sub(1)) {
                            Some(&s) if s != 0 => s,
                            _ => {
                                return err(
                                    "bad_kfunc_proto",
                                    format!(
                                        "kfunc {name}: its result's size is argument {n}, \
                                         which is not a known-size argument"
                                    ),
                                )
                            }
                        }
                    }
                    KfuncRet::Mem(size) => size,
                    KfuncRet::Integer | KfuncRet::Void | KfuncRet::Module(_) => 0,
                };
                let id = self.fresh_id();
                let mut r = RegState::pointer(
                    RegType::Mem {
                        size,
                        kind: MemKind::Helper,
                    },
                    0,
                );
                r.maybe_null = proto.flags.ret_null;
                r.id = id;
                if proto.flags.acquire {
                    r.ref_id = id;
                    st.refs.push(RefInfo { id, pc });
                }
                r
            }
        };
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }
}
