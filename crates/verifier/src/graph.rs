//! The kernel's object and graph kfuncs (`bpf_obj_new`, `bpf_obj_drop`,
//! `bpf_list_*`, `bpf_rbtree_*`, `bpf_refcount_acquire`) and
//! `bpf_kptr_xchg`, with the kernel verifier's ownership rules
//! (`check_kfunc_call`, `ref_set_non_owning`, `check_reg_allocation_locked`):
//!
//! - `bpf_obj_new` returns an *owning* reference (a held reference, NULL
//!   until checked) to an object of a program-local struct; it must be
//!   released before exit: dropped, pushed/added into a graph, or moved into
//!   a `__kptr` field with `bpf_kptr_xchg`.
//! - Graph operations take a root (`bpf_list_head`/`bpf_rb_root` at a
//!   constant offset of a map value or global data) whose `bpf_spin_lock`
//!   (same value) is held.
//! - After a push/add the object's registers become *non-owning*: usable
//!   (read, written) until the lock is released, when they are invalidated.
//! - pop/remove return owning references, front/back/first/root/left/right
//!   non-owning ones; all may be NULL.
//! - Objects are accessed within their BTF type, never at their special
//!   fields (nodes, refcount, kptrs, roots).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::{CallbackInfo, LockInfo, RefInfo, State, MAX_FRAMES};
use crate::helper_check::{enter_callback_or_return, finish_call};
use crate::reg_state::{RegState, RegType};
use bpfjet_obj::{FieldKind, GraphKind, LocalType, SpecialField};

/// `bpf_kptr_xchg`'s helper id.
pub(crate) const KPTR_XCHG: i32 = 194;
/// The caller id a `less` callback frame records.
const RBTREE_LESS_CB: i32 = -2;

/// The kernel's object and graph kfuncs, by their BTF names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphKfunc {
    ObjNew,
    ObjDrop,
    RefcountAcquire,
    ListPushFront,
    ListPushBack,
    ListPopFront,
    ListPopBack,
    ListFront,
    ListBack,
    RbAdd,
    RbRemove,
    RbFirst,
    RbRoot,
    RbLeft,
    RbRight,
}

impl GraphKfunc {
    pub const ALL: [GraphKfunc; 15] = [
        GraphKfunc::ObjNew,
        GraphKfunc::ObjDrop,
        GraphKfunc::RefcountAcquire,
        GraphKfunc::ListPushFront,
        GraphKfunc::ListPushBack,
        GraphKfunc::ListPopFront,
        GraphKfunc::ListPopBack,
        GraphKfunc::ListFront,
        GraphKfunc::ListBack,
        GraphKfunc::RbAdd,
        GraphKfunc::RbRemove,
        GraphKfunc::RbFirst,
        GraphKfunc::RbRoot,
        GraphKfunc::RbLeft,
        GraphKfunc::RbRight,
    ];

    pub fn name(self) -> &'static str {
        use GraphKfunc::*;
        match self {
            ObjNew => "bpf_obj_new_impl",
            ObjDrop => "bpf_obj_drop_impl",
            RefcountAcquire => "bpf_refcount_acquire_impl",
            ListPushFront => "bpf_list_push_front_impl",
            ListPushBack => "bpf_list_push_back_impl",
            ListPopFront => "bpf_list_pop_front",
            ListPopBack => "bpf_list_pop_back",
            ListFront => "bpf_list_front",
            ListBack => "bpf_list_back",
            RbAdd => "bpf_rbtree_add_impl",
            RbRemove => "bpf_rbtree_remove",
            RbFirst => "bpf_rbtree_first",
            RbRoot => "bpf_rbtree_root",
            RbLeft => "bpf_rbtree_left",
            RbRight => "bpf_rbtree_right",
        }
    }

    pub fn from_name(name: &str) -> Option<GraphKfunc> {
        GraphKfunc::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The graph the kfunc operates on (`None`: object kfuncs).
    fn graph(self) -> Option<GraphKind> {
        use GraphKfunc::*;
        match self {
            ObjNew | ObjDrop | RefcountAcquire => None,
            ListPushFront | ListPushBack | ListPopFront | ListPopBack | ListFront | ListBack => {
                Some(GraphKind::List)
            }
            RbAdd | RbRemove | RbFirst | RbRoot | RbLeft | RbRight => Some(GraphKind::Rbtree),
        }
    }

    /// Callable while a `bpf_spin_lock` is held (the kernel's
    /// `kfunc_spin_allowed`: the graph API and `bpf_refcount_acquire`).
    pub fn allowed_under_lock(self) -> bool {
        self.graph().is_some() || self == GraphKfunc::RefcountAcquire
    }
}

impl Verifier<'_> {
    /// The program-local struct `type_id` (cached per verification).
    pub(crate) fn local_type(&mut self, type_id: u32) -> VResult<LocalType> {
        if let Some(t) = self.local_types.get(&type_id) {
            return Ok(t.clone());
        }
        let Some(btf) = self.env.btf else {
            return err(
                "graph_kfunc",
                "bpf_obj_new requires prog BTF (the object has no .BTF section)",
            );
        };
        let t = LocalType::of(btf, type_id).map_err(|why| {
            crate::error::VerifyError::new(
                "graph_kfunc",
                format!("bpf_obj_new type ID argument must be of a struct: {why}"),
            )
        })?;
        self.local_types.insert(type_id, t.clone());
        Ok(t)
    }

    fn type_name(&mut self, type_id: u32) -> String {
        self.local_type(type_id)
            .map_or_else(|_| format!("type#{type_id}"), |t| t.name)
    }

    /// The special field of map `map`'s value at `off`, if any.
    fn map_field(&self, map: u32, off: i64) -> Option<SpecialField> {
        self.env
            .map_fields
            .get(map as usize)?
            .iter()
            .find(|f| i64::from(f.off) == off)
            .copied()
    }

    /// Loads and stores of `[lo, hi)` in map `map`'s value must not touch a
    /// graph root or a kptr (the lock has its own check and message).
    pub(crate) fn check_map_special_fields(&self, map: u32, lo: i64, hi: i64) -> VResult<()> {
        let Some(fields) = self.env.map_fields.get(map as usize) else {
            return Ok(());
        };
        match fields
            .iter()
            .find(|f| f.kind != FieldKind::SpinLock && f.overlaps(lo, hi))
        {
            Some(
                f @ SpecialField {
                    kind: FieldKind::Kptr { .. },
                    ..
                },
            ) => err(
                "kptr_access",
                format!(
                    "kptr at off={} accessed directly by load/store: bpfjet moves kptrs \
                     only with bpf_kptr_xchg",
                    f.off
                ),
            ),
            Some(f) => err(
                "graph_field_access",
                format!(
                    "{} cannot be accessed directly by load/store",
                    f.type_name()
                ),
            ),
            None => Ok(()),
        }
    }

    /// A load or store of `size` bytes at `off` past an object pointer.
    pub(crate) fn check_alloc_access(
        &mut self,
        base: &RegState,
        regno: u8,
        type_id: u32,
        off: i64,
        size: i64,
    ) -> VResult<()> {
        let t = self.local_type(type_id)?;
        let Some(c) = base.val.as_const() else {
            return err(
                "alloc_access",
                format!("R{regno} is ptr_{} invalid variable offset", t.name),
            );
        };
        let start = base.off as i64 + c as i64 + off;
        if start < 0 || start + size > i64::from(t.size) {
            return err(
                "alloc_access",
                format!(
                    "access beyond struct {} at off {start} size {size} (the struct is {} bytes)",
                    t.name, t.size
                ),
            );
        }
        if let Some(f) = t.fields.iter().find(|f| f.overlaps(start, start + size)) {
            return err(
                "alloc_access",
                format!(
                    "direct access to {} is disallowed (struct {} at off {})",
                    f.type_name(),
                    t.name,
                    f.off
                ),
            );
        }
        Ok(())
    }

    /// The root argument `regno`: a map value pointer at the constant offset
    /// of a root of `graph`, whose lock is held. Returns the root field.
    fn graph_root_arg(
        &self,
        st: &State,
        regno: u8,
        graph: GraphKind,
        name: &str,
    ) -> VResult<(u32, u32, u32)> {
        let reg = *st.reg(regno);
        let RegType::MapValue { map } = reg.ty else {
            return err(
                "graph_kfunc",
                format!(
                    "arg#{} expected pointer to {} in a map value (R{regno} is {}) for {name}",
                    regno - 1,
                    graph.root_name(),
                    reg.ty.name()
                ),
            );
        };
        if reg.maybe_null {
            return err(
                "null_deref",
                format!("R{regno} type=map_value_or_null: null-check it before {name}"),
            );
        }
        let Some(c) = reg.val.as_const() else {
            return err(
                "graph_kfunc",
                format!(
                    "R{regno} doesn't have constant offset. {} has to be at the constant offset",
                    graph.root_name()
                ),
            );
        };
        let off = reg.off as i64 + c as i64;
        let field = self.map_field(map, off);
        let Some(SpecialField {
            kind:
                FieldKind::Root {
                    graph: g,
                    value_type,
                    node_off,
                },
            ..
        }) = field.filter(|f| matches!(f.kind, FieldKind::Root { graph: g, .. } if g == graph))
        else {
            return err(
                "graph_kfunc",
                format!(
                    "arg#{} doesn't point to a {} (off {off} of the map value) for {name}",
                    regno - 1,
                    graph.root_name()
                ),
            );
        };
        let _ = g;
        let lock_off = self.spin_lock_off(map);
        if st.lock != Some(LockInfo { map, id: reg.id }) {
            return err(
                "graph_lock",
                format!(
                    "bpf_spin_lock at off={} must be held for {} ({name})",
                    lock_off.map_or(-1, i64::from),
                    graph.root_name()
                ),
            );
        }
        Ok((map, value_type, node_off))
    }

    /// A node argument: an object of the root's type pointing at its node
    /// field; `owning`: the kfunc takes the program's reference (add/push).
    #[allow(clippy::too_many_arguments)]
    fn graph_node_arg(
        &mut self,
        st: &State,
        regno: u8,
        graph: GraphKind,
        value_type: u32,
        node_off: u32,
        owning: bool,
        name: &str,
    ) -> VResult<RegState> {
        let reg = *st.reg(regno);
        let RegType::Alloc {
            type_id,
            owning: is_owning,
        } = reg.ty
        else {
            return err(
                "graph_kfunc",
                format!(
                    "arg#{} expected pointer to allocated object (R{regno} is {}) for {name}",
                    regno - 1,
                    reg.ty.name()
                ),
            );
        };
        if reg.maybe_null {
            return err(
                "null_deref",
                format!(
                    "R{regno} may be NULL: null-check the object before {name} (arg#{})",
                    regno - 1
                ),
            );
        }
        if owning && (!is_owning || reg.ref_id == 0) {
            return err(
                "graph_kfunc",
                format!(
                    "arg#{} expected an owning reference (from bpf_obj_new or a pop/remove) \
                     for {name}: R{regno} is a non-owning reference",
                    regno - 1
                ),
            );
        }
        // Without `owning`, any reference will do: the kernel (6.18)
        // accepts owning and non-owning nodes for remove/left/right, which
        // check at run time that the node is in this tree.
        let _ = is_owning;
        let at = reg.off as i64 + reg.val.as_const().map_or(i64::MIN / 2, |c| c as i64);
        if type_id != value_type || at != i64::from(node_off) {
            let (want, got) = (self.type_name(value_type), self.type_name(type_id));
            return err(
                "graph_kfunc",
                format!(
                    "operation on {} expects arg#{} {} at offset={node_off} in struct {want}, \
                     but arg is at offset={at} in struct {got}",
                    graph.root_name(),
                    regno - 1,
                    graph.node_name()
                ),
            );
        }
        Ok(reg)
    }

    /// Record the node offset the call at `pc` works with (one per call).
    fn note_node_off(&mut self, pc: usize, node_off: u32) -> VResult<()> {
        match self.facts.graph_node_offs.insert(pc, node_off) {
            Some(prev) if prev != node_off => err(
                "graph_kfunc",
                format!(
                    "the graph kfunc call at insn {pc} operates on roots of objects with \
                     different node offsets ({prev} and {node_off}) on different paths"
                ),
            ),
            _ => Ok(()),
        }
    }

    fn owning_result(&mut self, st: &mut State, pc: usize, type_id: u32, off: u32) -> RegState {
        let id = self.fresh_id();
        let mut r = RegState::pointer(
            RegType::Alloc {
                type_id,
                owning: true,
            },
            off as i32,
        );
        r.maybe_null = true;
        r.id = id;
        r.ref_id = id;
        st.refs.push(RefInfo { id, pc });
        r
    }

    fn non_owning_result(&mut self, type_id: u32, off: u32) -> RegState {
        let mut r = RegState::pointer(
            RegType::Alloc {
                type_id,
                owning: false,
            },
            off as i32,
        );
        r.maybe_null = true;
        r.id = self.fresh_id();
        r
    }

    /// The kernel's `ref_set_non_owning`: the reference ends, every copy of
    /// the pointer stays usable as a non-owning reference.
    fn set_non_owning(st: &mut State, ref_id: u32) {
        st.refs.retain(|r| r.id != ref_id);
        st.for_each_reg(|r| {
            if r.ref_id == ref_id {
                if let RegType::Alloc { type_id, .. } = r.ty {
                    r.ty = RegType::Alloc {
                        type_id,
                        owning: false,
                    };
                }
                r.ref_id = 0;
            }
        });
    }

    /// The reference `ref_id` ends; its copies become unusable.
    fn release_ref(&self, st: &mut State, ref_id: u32) {
        st.refs.retain(|r| r.id != ref_id);
        st.for_each_reg(|r| {
            if r.ref_id == ref_id {
                *r = RegState::unknown();
            }
        });
    }

    /// At `bpf_spin_unlock`: non-owning references die with the lock (the
    /// kernel's `invalidate_non_owning_refs`).
    pub(crate) fn invalidate_non_owning(st: &mut State) {
        st.for_each_reg(|r| {
            if matches!(r.ty, RegType::Alloc { owning: false, .. }) {
                *r = RegState::unknown();
            }
        });
    }

    fn in_less_callback(st: &State) -> bool {
        st.frames.iter().any(|f| {
            f.callback
                .as_ref()
                .is_some_and(|c| c.helper == RBTREE_LESS_CB)
        })
    }

    fn require_init(st: &State, regno: u8, name: &str) -> VResult<()> {
        if !st.reg(regno).is_init() {
            return err(
                "uninit_reg",
                format!("R{regno} !read_ok: argument {regno} of kfunc {name} is not set"),
            );
        }
        Ok(())
    }

    /// An owning object argument released by the call (`bpf_obj_drop`) or
    /// read by it (`bpf_refcount_acquire`): returns its type.
    fn object_arg(&mut self, st: &State, name: &str, release: bool) -> VResult<(u32, RegState)> {
        let reg = *st.reg(1);
        let RegType::Alloc { type_id, owning } = reg.ty else {
            return err(
                "graph_kfunc",
                format!(
                    "arg#0 expected pointer to allocated object (R1 is {}) for {name}",
                    reg.ty.name()
                ),
            );
        };
        if reg.maybe_null {
            return err(
                "null_deref",
                format!("R1 may be NULL: null-check the object before {name}"),
            );
        }
        if release && (!owning || reg.ref_id == 0) {
            return err(
                "bad_release",
                format!(
                    "arg#0 is a non-owning reference: {name} releases only an owning \
                     reference (R1 was pushed into a graph or never acquired)"
                ),
            );
        }
        if reg.off != 0 || !reg.val.is_zero() {
            return err(
                "bad_release",
                format!("R1 must have zero offset when passed to {name}"),
            );
        }
        Ok((type_id, reg))
    }

    pub(crate) fn check_graph_kfunc(
        &mut self,
        st: &mut State,
        pc: usize,
        k: GraphKfunc,
    ) -> VResult<Succ> {
        use GraphKfunc::*;
        let name = k.name();
        if st.lock.is_some() && !k.allowed_under_lock() {
            return err(
                "spin_lock",
                format!("function calls are not allowed while holding a lock ({name})"),
            );
        }
        // The tree is being changed around a less callback: the kernel
        // refuses adding and removing there (reading the first node is
        // allowed, and harmless: the callback runs before the insertion).
        if k.graph().is_some() && k != RbFirst && Self::in_less_callback(st) {
            return err(
                "graph_kfunc",
                format!("{name} is not allowed in a bpf_rbtree_add less callback"),
            );
        }
        let r0 = match k {
            ObjNew => {
                Self::require_init(st, 1, name)?;
                let reg = *st.reg(1);
                let Some(type_id) = reg.const_value().filter(|_| reg.is_scalar()) else {
                    return err(
                        "graph_kfunc",
                        format!(
                            "arg#0 (local_type_id__k) of {name} must be a known constant \
                             (bpf_core_type_id_local of the struct)"
                        ),
                    );
                };
                self.need_reg(st, 1);
                let t = self.local_type(type_id as u32)?;
                self.owning_result(st, pc, t.type_id, 0)
            }
            ObjDrop => {
                Self::require_init(st, 1, name)?;
                let (_, reg) = self.object_arg(st, name, true)?;
                self.release_ref(st, reg.ref_id);
                RegState::NOT_INIT
            }
            RefcountAcquire => {
                Self::require_init(st, 1, name)?;
                let (type_id, arg) = self.object_arg(st, name, false)?;
                if self.local_type(type_id)?.refcount_off().is_none() {
                    let t = self.type_name(type_id);
                    return err(
                        "graph_kfunc",
                        format!("arg#0 of {name}: struct {t} has no bpf_refcount field"),
                    );
                }
                let mut r = self.owning_result(st, pc, type_id, 0);
                // An owning reference holds a count, so taking another
                // cannot fail (the kernel's is_kfunc_ret_null); through a
                // non-owning one the object may be on its way out.
                if matches!(arg.ty, RegType::Alloc { owning: true, .. }) && arg.ref_id != 0 {
                    r.maybe_null = false;
                }
                r
            }
            ListPushFront | ListPushBack | RbAdd => {
                for r in 1..=2 {
                    Self::require_init(st, r, name)?;
                }
                let graph = k.graph().unwrap_or(GraphKind::List);
                let (_, value_type, node_off) = self.graph_root_arg(st, 1, graph, name)?;
                self.note_node_off(pc, node_off)?;
                let node = self.graph_node_arg(st, 2, graph, value_type, node_off, true, name)?;
                if k == RbAdd {
                    return self.rbtree_add(st, pc, node, value_type, node_off);
                }
                Self::set_non_owning(st, node.ref_id);
                RegState::unknown()
            }
            ListPopFront | ListPopBack | RbFirst | RbRoot | ListFront | ListBack => {
                Self::require_init(st, 1, name)?;
                let graph = k.graph().unwrap_or(GraphKind::List);
                let (_, value_type, node_off) = self.graph_root_arg(st, 1, graph, name)?;
                self.note_node_off(pc, node_off)?;
                if matches!(k, ListPopFront | ListPopBack) {
                    self.owning_result(st, pc, value_type, node_off)
                } else {
                    self.non_owning_result(value_type, node_off)
                }
            }
            RbRemove | RbLeft | RbRight => {
                for r in 1..=2 {
                    Self::require_init(st, r, name)?;
                }
                let (_, value_type, node_off) =
                    self.graph_root_arg(st, 1, GraphKind::Rbtree, name)?;
                self.note_node_off(pc, node_off)?;
                let owning_arg = false;
                self.graph_node_arg(
                    st,
                    2,
                    GraphKind::Rbtree,
                    value_type,
                    node_off,
                    owning_arg,
                    name,
                )?;
                if k == RbRemove {
                    self.owning_result(st, pc, value_type, node_off)
                } else {
                    self.non_owning_result(value_type, node_off)
                }
            }
        };
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }

    /// `bpf_rbtree_add_impl(root, node, less, meta, off)`: the node's
    /// reference becomes non-owning, and `less(a, b)` is verified as a
    /// callback called with two non-owning node pointers while the lock is
    /// held, returning 0 or 1.
    fn rbtree_add(
        &mut self,
        st: &mut State,
        pc: usize,
        node: RegState,
        value_type: u32,
        node_off: u32,
    ) -> VResult<Succ> {
        let less = *st.reg(3);
        let RegType::Func { entry } = less.ty else {
            return err(
                "graph_kfunc",
                format!(
                    "arg#2 (less) of bpf_rbtree_add_impl must be a static function \
                     (R3 is {})",
                    less.ty.name()
                ),
            );
        };
        let entry = entry as usize;
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
        let mut args = [RegState::NOT_INIT; 5];
        for a in args.iter_mut().take(2) {
            *a = RegState::pointer(
                RegType::Alloc {
                    type_id: value_type,
                    owning: false,
                },
                node_off as i32,
            );
        }
        let info = CallbackInfo {
            helper: RBTREE_LESS_CB,
            ret: (0, 1),
            args,
        };
        // The callback's path keeps the node owned: it comes back to this
        // call, which takes the node again (the kernel converts the
        // reference after pushing the callback's state).
        let succ = enter_callback_or_return(st, pc, entry, info, true);
        Self::set_non_owning(st, node.ref_id);
        Ok(succ)
    }

    /// `bpf_kptr_xchg(map_value + kptr field, obj or NULL)`: the object's
    /// reference moves into the map; the old one (or NULL) comes out owned.
    pub(crate) fn check_kptr_xchg(&mut self, st: &mut State, pc: usize) -> VResult<Succ> {
        const NAME: &str = "bpf_kptr_xchg";
        self.check_call_under_lock(st, KPTR_XCHG, NAME)?;
        for r in 1..=2 {
            Self::require_init(st, r, NAME)?;
        }
        let dst = *st.reg(1);
        let RegType::MapValue { map } = dst.ty else {
            return err(
                "kptr_xchg",
                format!(
                    "R1 type={} expected=map_value (argument 1 of {NAME})",
                    dst.ty.name()
                ),
            );
        };
        if dst.maybe_null {
            return err(
                "null_deref",
                "R1 type=map_value_or_null expected=map_value: null-check it before bpf_kptr_xchg",
            );
        }
        let Some(c) = dst.val.as_const() else {
            return err(
                "kptr_xchg",
                "R1 doesn't have constant offset. kptr has to be at the constant offset",
            );
        };
        let off = dst.off as i64 + c as i64;
        let Some(SpecialField {
            kind: FieldKind::Kptr { target },
            ..
        }) = self.map_field(map, off)
        else {
            return err("kptr_xchg", format!("R1 off={off} doesn't point to kptr"));
        };
        if let Some(ty) = self.module_kptr_type(target, off)? {
            return self.module_kptr_xchg(st, pc, off, ty);
        }
        let src = *st.reg(2);
        if src.is_null_const() {
            self.need_reg(st, 2);
        } else {
            let RegType::Alloc { type_id, owning } = src.ty else {
                return err(
                    "kptr_xchg",
                    format!(
                        "R2 type={} expected=ptr_ or NULL (argument 2 of {NAME})",
                        src.ty.name()
                    ),
                );
            };
            if src.maybe_null {
                return err(
                    "null_deref",
                    "R2 may be NULL: null-check the object before bpf_kptr_xchg",
                );
            }
            if !owning || src.ref_id == 0 {
                return err(
                    "kptr_xchg",
                    "R2 must be referenced or trusted: bpf_kptr_xchg takes an owning reference",
                );
            }
            if type_id != target || src.off != 0 || !src.val.is_zero() {
                let (want, got) = (self.type_name(target), self.type_name(type_id));
                return err(
                    "kptr_xchg",
                    format!(
                        "R2 is of type {got} (off {}) but kptr at off={off} expects struct {want} at off 0",
                        src.off
                    ),
                );
            }
            self.release_ref(st, src.ref_id);
        }
        let r0 = self.owning_result(st, pc, target, 0);
        finish_call(st, r0);
        Ok(Succ::Goto(pc + 1))
    }
}
