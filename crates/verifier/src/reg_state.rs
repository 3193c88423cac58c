//! What the verifier knows about one register: its type, and for pointers a
//! fixed plus a variable offset, the id shared by copies (null checks, packet
//! ranges, equal scalars) and the reference it belongs to.

use crate::range::Scalar;
use std::fmt;

/// Where memory handed out by a helper comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// `bpf_ringbuf_reserve`: writable, must be submitted or discarded.
    Ringbuf,
    /// A map key handed to a `bpf_for_each_map_elem` callback: read-only.
    MapKey,
    /// Memory a helper returns (read/write).
    Helper,
    /// The current number of an open-coded number iterator
    /// (`bpf_iter_num_next`): read-only.
    IterValue,
    /// A slice of a dynptr's memory (`bpf_dynptr_data`, `bpf_dynptr_slice`):
    /// dies with the dynptr (`RegState::dynptr_id`).
    /// `pkt`: of an XDP dynptr (dies when a helper changes the packet).
    DynptrSlice { rdonly: bool, pkt: bool },
}

/// What a `struct bpf_dynptr` points into (the kernel's
/// `enum bpf_dynptr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DynptrKind {
    /// `bpf_dynptr_from_mem`: a map value.
    Local,
    /// `bpf_ringbuf_reserve_dynptr`: a ring-buffer sample, a reference.
    Ringbuf,
    /// `bpf_dynptr_from_xdp`: the frame.
    Xdp,
}

impl DynptrKind {
    /// The kernel's name of the type in its messages.
    pub fn name(self) -> &'static str {
        match self {
            DynptrKind::Local => "local",
            DynptrKind::Ringbuf => "ringbuf",
            DynptrKind::Xdp => "xdp",
        }
    }

    /// Whether slices of it point into the packet (and die with packet
    /// pointers when a helper changes the packet).
    pub fn is_pkt(self) -> bool {
        self == DynptrKind::Xdp
    }
}

impl MemKind {
    /// Whether programs may only read it.
    pub fn is_rdonly(self) -> bool {
        matches!(
            self,
            MemKind::MapKey | MemKind::IterValue | MemKind::DynptrSlice { rdonly: true, .. }
        )
    }

    /// What a write into read-only memory of this kind wrote into.
    pub fn rdonly_what(self) -> &'static str {
        match self {
            MemKind::IterValue => "a read-only iterator element (rdonly_mem)",
            MemKind::DynptrSlice { .. } => "a read-only dynptr slice (rdonly_mem)",
            _ => "a read-only map key",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegType {
    /// Never written on this path: reading it is an error.
    NotInit,
    Scalar,
    /// The program's context (`struct xdp_md *`).
    Ctx,
    /// `xdp_md->data` plus offsets.
    Pkt,
    /// `xdp_md->data_meta` plus offsets.
    PktMeta,
    /// `xdp_md->data_end`: may only be compared against.
    PktEnd,
    /// A map (`lddw` of a map): passed to helpers or, privileged, read as
    /// the kernel's map struct (`map_struct.rs`). `map` indexes the
    /// verifier's map table.
    MapPtr {
        map: u32,
    },
    /// Inside a map value of `map` (`off` + variable offset from its start).
    MapValue {
        map: u32,
    },
    /// The stack of the call frame `frame` (0 = the program's own).
    Stack {
        frame: u8,
    },
    /// `size` bytes of memory from a helper.
    Mem {
        size: u32,
        kind: MemKind,
    },
    /// A subprogram (callback) starting at slot `entry`.
    Func {
        entry: u32,
    },
    /// An object of the program's struct `type_id` (BTF id) from
    /// `bpf_obj_new` or a graph kfunc: `owning` while the program holds it,
    /// non-owning once pushed into a graph (valid until the lock is
    /// released; see `graph`).
    Alloc {
        type_id: u32,
        owning: bool,
    },
    /// An object of a kfunc library's own type (`VerifyEnv::module_types`
    /// index `ty`), from one of its kfuncs or a `__kptr` (`module_kptr`).
    Module {
        ty: u8,
    },
    /// A kernel object of struct `ty` (`VerifyEnv::kernel_structs`): what
    /// a `tp_btf` or fentry/fexit argument, or a filled pointer field of
    /// one, points to; readable at the fields bpfjet fills (`tp_btf.rs`).
    KernelObj {
        ty: u8,
    },
    /// An open-coded number iterator (`struct bpf_iter_num`), only ever in
    /// a stack slot: `active` until `bpf_iter_num_next` returned NULL on
    /// this path. The state's `ref_id` is the reference `bpf_iter_num_new`
    /// acquired and `bpf_iter_num_destroy` releases; `range` counts the
    /// `next` calls that returned an element (the kernel's iter depth:
    /// kept out of pruning comparisons, seen by the loop detector).
    IterNum {
        active: bool,
    },
    /// One of the two stack slots of a `struct bpf_dynptr` (`first`: the
    /// lower one, where the dynptr starts), only ever in a stack slot. The
    /// state's `id` names the dynptr (its slices carry it as `dynptr_id`),
    /// `ref_id` the reference of a ringbuf dynptr (`dynptr.rs`).
    Dynptr {
        kind: DynptrKind,
        first: bool,
    },
    /// A pointer to a read-only dynptr the program does not own (the
    /// kernel's `CONST_PTR_TO_DYNPTR`): `bpf_user_ringbuf_drain`'s
    /// callback argument, a local dynptr over one sample. Helpers and
    /// kfuncs may use it, never initialise or release it; `id` names it.
    ConstDynptr,
}

impl RegType {
    pub fn is_pointer(self) -> bool {
        !matches!(self, RegType::NotInit | RegType::Scalar)
    }

    pub fn is_pkt(self) -> bool {
        matches!(self, RegType::Pkt | RegType::PktMeta)
    }

    pub fn name(self) -> &'static str {
        match self {
            RegType::NotInit => "uninit",
            RegType::Scalar => "scalar",
            RegType::Ctx => "ctx",
            RegType::Pkt => "pkt",
            RegType::PktMeta => "pkt_meta",
            RegType::PktEnd => "pkt_end",
            RegType::MapPtr { .. } => "map_ptr",
            RegType::MapValue { .. } => "map_value",
            RegType::Stack { .. } => "fp",
            RegType::Mem {
                kind: MemKind::Ringbuf,
                ..
            } => "ringbuf_mem",
            RegType::Mem { .. } => "mem",
            RegType::Func { .. } => "func",
            RegType::Alloc { owning: true, .. } => "ptr_alloc_obj",
            RegType::Alloc { owning: false, .. } => "ptr_alloc_obj_non_own",
            RegType::Module { .. } => "ptr_module_obj",
            RegType::KernelObj { .. } => "trusted_ptr_kernel_obj",
            RegType::IterNum { .. } => "iter_num",
            RegType::Dynptr { .. } => "dynptr",
            RegType::ConstDynptr => "dynptr_ptr",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegState {
    pub ty: RegType,
    /// A pointer that may be NULL until a null check (`id` links the copies).
    pub maybe_null: bool,
    /// Fixed offset of a pointer.
    pub off: i32,
    /// Scalars: the value. Pointers: the variable part of the offset.
    pub val: Scalar,
    /// Copies share an id: null checks and packet range checks of one apply to
    /// all; scalars with equal ids hold equal values.
    pub id: u32,
    /// Packet pointers: bytes from `pkt + var_off` proven to be inside the packet.
    pub range: u32,
    /// The acquired reference (ringbuf reservation) this pointer belongs to.
    pub ref_id: u32,
    /// Dynptr slices: the `id` of the dynptr they came from (they die with
    /// it).
    pub dynptr_id: u32,
    /// Scalars in explored states (checkpoints): some safety decision below
    /// the state depended on the exact value, so pruning must compare it.
    /// Imprecise scalars match any scalar. Never set in states being
    /// explored, only by backtracking into recorded ones (`precision`).
    pub precise: bool,
}

impl RegState {
    pub const NOT_INIT: RegState = RegState {
        ty: RegType::NotInit,
        maybe_null: false,
        off: 0,
        val: Scalar::UNKNOWN,
        id: 0,
        range: 0,
        ref_id: 0,
        dynptr_id: 0,
        precise: false,
    };

    pub fn scalar(val: Scalar) -> RegState {
        RegState {
            ty: RegType::Scalar,
            val,
            ..RegState::NOT_INIT
        }
    }

    pub fn unknown() -> RegState {
        RegState::scalar(Scalar::UNKNOWN)
    }

    pub fn constant(v: u64) -> RegState {
        RegState::scalar(Scalar::constant(v))
    }

    /// A pointer of type `ty` at fixed offset `off`, no variable part.
    pub fn pointer(ty: RegType, off: i32) -> RegState {
        RegState {
            ty,
            off,
            val: Scalar::constant(0),
            ..RegState::NOT_INIT
        }
    }

    pub fn is_init(&self) -> bool {
        self.ty != RegType::NotInit
    }

    pub fn is_scalar(&self) -> bool {
        self.ty == RegType::Scalar
    }

    pub fn is_pointer(&self) -> bool {
        self.ty.is_pointer()
    }

    pub fn const_value(&self) -> Option<u64> {
        if self.is_scalar() {
            self.val.as_const()
        } else {
            None
        }
    }

    /// A scalar known to be zero (a NULL).
    pub fn is_null_const(&self) -> bool {
        self.const_value() == Some(0)
    }

    /// The range of `off + var_off` as signed byte offsets.
    pub fn offset_range(&self) -> (i64, i64) {
        (
            (self.off as i64).saturating_add(self.val.smin),
            (self.off as i64).saturating_add(self.val.smax),
        )
    }
}

impl fmt::Debug for RegState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for RegState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            RegType::NotInit => return f.write_str("uninit"),
            RegType::Scalar => {
                write!(f, "scalar({:?}", self.val)?;
                if self.id != 0 {
                    write!(f, ",id={}", self.id)?;
                }
                return f.write_str(")");
            }
            _ => {}
        }
        f.write_str(self.ty.name())?;
        if self.maybe_null {
            f.write_str("_or_null")?;
        }
        let mut parts = Vec::new();
        match self.ty {
            RegType::MapPtr { map } | RegType::MapValue { map } => parts.push(format!("map={map}")),
            RegType::Stack { frame } if frame != 0 => parts.push(format!("frame={frame}")),
            RegType::Mem { size, .. } => parts.push(format!("size={size}")),
            RegType::Func { entry } => parts.push(format!("entry={entry}")),
            _ => {}
        }
        if self.off != 0 {
            parts.push(format!("off={}", self.off));
        }
        if !self.val.is_zero() {
            parts.push(format!("var_off=({:?})", self.val));
        }
        if self.ty.is_pkt() {
            parts.push(format!("r={}", self.range));
        }
        if self.id != 0 {
            parts.push(format!("id={}", self.id));
        }
        if self.ref_id != 0 {
            parts.push(format!("ref={}", self.ref_id));
        }
        write!(f, "({})", parts.join(","))
    }
}
