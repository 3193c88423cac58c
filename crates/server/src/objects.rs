//! The objects a bpfjet fd holds, and their shared records.

use bpfjet_maps::Map;
use bpfjet_runtime::LoadedObject;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub enum Obj {
    Map(Arc<MapObj>),
    Prog(Arc<ProgObj>),
    Btf(Arc<BtfObj>),
    /// An XDP or freplace link: its id (the record is in the namespace).
    Link(u32),
    /// The fd `BPF_ENABLE_STATS` returns: statistics are counted while one
    /// is open.
    Stats,
    /// A stand-in perf event fd for a probe bpfjet runs in processes.
    PerfEvent(Arc<crate::perf_events::PerfProbe>),
    /// A perf output event (`PERF_COUNT_SW_BPF_OUTPUT`) of a perf buffer
    /// reader.
    PerfOutput(Arc<crate::perf_events::PerfOutput>),
}

/// What `bpf()` reports about a map beyond its [`Map`] spec.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MapMeta {
    pub map_type: u32,
    pub map_flags: u32,
    pub map_extra: u64,
    pub btf_id: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    /// A PROG_ARRAY's owner class (`crate::tail_calls::TailClass`), set
    /// by the first program that uses it.
    #[serde(default)]
    pub tail_owner: Option<(u32, bool, u32)>,
}

/// What an fd lets user space do with its map: the kernel keeps
/// `BPF_F_RDONLY`/`BPF_F_WRONLY` on the fd (`map_get_sys_perms`), from the
/// creating call's flags, `BPF_MAP_GET_FD_BY_ID`'s `open_flags` or
/// `BPF_OBJ_GET`'s `file_flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub read: bool,
    pub write: bool,
}

impl Access {
    pub const READ_WRITE: Access = Access {
        read: true,
        write: true,
    };

    /// The access `BPF_F_RDONLY` / `BPF_F_WRONLY` in `flags` give; both
    /// at once is EINVAL (`bpf_get_file_flag`).
    pub fn from_flags(flags: u32) -> Option<Access> {
        const RDONLY: u32 = 1 << 3;
        const WRONLY: u32 = 1 << 4;
        match (flags & RDONLY != 0, flags & WRONLY != 0) {
            (true, true) => None,
            (rd, wr) => Some(Access {
                read: !wr,
                write: !rd,
            }),
        }
    }
}

pub struct MapObj {
    pub map: Arc<Map>,
    pub meta: MapMeta,
    /// This fd's access (each fd has its own `MapObj`).
    pub access: Access,
}

/// A loaded program as every process of the instance can rebuild it: the
/// instructions as the control plane passed them, with map references
/// turned into map ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProgRecord {
    pub id: u32,
    pub prog_type: u32,
    pub expected_attach_type: u32,
    pub prog_flags: u32,
    pub name: String,
    pub license: String,
    /// Raw instructions, map lddws as `PSEUDO_MAP_IDX(_VALUE)` indexing
    /// `map_ids`.
    pub insns: Vec<u64>,
    pub map_ids: Vec<u32>,
    pub btf_id: u32,
    /// CLOCK_BOOTTIME nanoseconds at load, as the kernel reports it.
    pub load_time: u64,
    pub uid: u32,
    pub tag: [u8; 8],
    /// `bpf_func_info` records as loaded: `(insn_off, type_id)` in
    /// `btf_id`'s BTF. They name the global functions an EXT program can
    /// replace.
    #[serde(default)]
    pub func_info: Vec<(u32, u32)>,
    /// An EXT program: the program and the function (BTF id) it was loaded
    /// to replace (`attach_prog_fd`, `attach_btf_id`).
    #[serde(default)]
    pub attach_prog_id: u32,
    #[serde(default)]
    pub attach_btf_id: u32,
    /// The target's BTF id (`attach_btf_obj_id` of the program's info).
    #[serde(default)]
    pub attach_btf_obj_id: u32,
    /// The load-time target was taken by a link; another attach must name
    /// its target, as in the kernel.
    #[serde(default)]
    pub load_target_used: bool,
    /// Kernel functions the program calls, indexed by its `call` kfunc
    /// imms (`crate::kfunc_calls`: resolved from the vmlinux BTF ids
    /// libbpf passed), and those named only by `bpf_ksym_exists`.
    #[serde(default)]
    pub kfuncs: Vec<String>,
    #[serde(default)]
    pub weak_kfuncs: Vec<String>,
    /// A `tp_btf` program's tracepoint (`attach_btf_id` names its
    /// `btf_trace_NAME` in the kernel's BTF), or the function an
    /// fentry/fexit program traces (the entry of XDP program
    /// `attach_prog_id`); empty for other programs.
    #[serde(default)]
    pub tracepoint: String,
}

pub struct ProgObj {
    pub rec: ProgRecord,
    /// The program bound to its maps, verified by bpfjet.
    pub loaded: LoadedObject,
    pub run_time_ns: Mutex<(u64, u64)>,
}

pub struct BtfObj {
    pub id: u32,
    pub raw: Vec<u8>,
}
