//! Typed `bpf()` commands: one struct per `union bpf_attr` variant bpfjet
//! serves. Addresses are the caller's; fields the kernel writes back into
//! the attr (`next_id`, `retval`, ...) are `Cell`s a backend sets.

use std::cell::Cell;

/// `enum bpf_cmd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Cmd {
    MapCreate = 0,
    MapLookupElem = 1,
    MapUpdateElem = 2,
    MapDeleteElem = 3,
    MapGetNextKey = 4,
    ProgLoad = 5,
    ObjPin = 6,
    ObjGet = 7,
    ProgAttach = 8,
    ProgDetach = 9,
    ProgTestRun = 10,
    ProgGetNextId = 11,
    MapGetNextId = 12,
    ProgGetFdById = 13,
    MapGetFdById = 14,
    ObjGetInfoByFd = 15,
    ProgQuery = 16,
    RawTracepointOpen = 17,
    BtfLoad = 18,
    BtfGetFdById = 19,
    TaskFdQuery = 20,
    MapLookupAndDeleteElem = 21,
    MapFreeze = 22,
    BtfGetNextId = 23,
    MapLookupBatch = 24,
    MapLookupAndDeleteBatch = 25,
    MapUpdateBatch = 26,
    MapDeleteBatch = 27,
    LinkCreate = 28,
    LinkUpdate = 29,
    LinkGetFdById = 30,
    LinkGetNextId = 31,
    EnableStats = 32,
    IterCreate = 33,
    LinkDetach = 34,
    ProgBindMap = 35,
    TokenCreate = 36,
}

impl Cmd {
    pub fn from_raw(cmd: u32) -> Option<Cmd> {
        if cmd <= Cmd::TokenCreate as u32 {
            // SAFETY: Cmd is repr(u32) with every value 0..=36.
            Some(unsafe { std::mem::transmute::<u32, Cmd>(cmd) })
        } else {
            None
        }
    }

    /// The kernel's name (`BPF_MAP_CREATE`), for messages.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 37] = [
            "BPF_MAP_CREATE",
            "BPF_MAP_LOOKUP_ELEM",
            "BPF_MAP_UPDATE_ELEM",
            "BPF_MAP_DELETE_ELEM",
            "BPF_MAP_GET_NEXT_KEY",
            "BPF_PROG_LOAD",
            "BPF_OBJ_PIN",
            "BPF_OBJ_GET",
            "BPF_PROG_ATTACH",
            "BPF_PROG_DETACH",
            "BPF_PROG_TEST_RUN",
            "BPF_PROG_GET_NEXT_ID",
            "BPF_MAP_GET_NEXT_ID",
            "BPF_PROG_GET_FD_BY_ID",
            "BPF_MAP_GET_FD_BY_ID",
            "BPF_OBJ_GET_INFO_BY_FD",
            "BPF_PROG_QUERY",
            "BPF_RAW_TRACEPOINT_OPEN",
            "BPF_BTF_LOAD",
            "BPF_BTF_GET_FD_BY_ID",
            "BPF_TASK_FD_QUERY",
            "BPF_MAP_LOOKUP_AND_DELETE_ELEM",
            "BPF_MAP_FREEZE",
            "BPF_BTF_GET_NEXT_ID",
            "BPF_MAP_LOOKUP_BATCH",
            "BPF_MAP_LOOKUP_AND_DELETE_BATCH",
            "BPF_MAP_UPDATE_BATCH",
            "BPF_MAP_DELETE_BATCH",
            "BPF_LINK_CREATE",
            "BPF_LINK_UPDATE",
            "BPF_LINK_GET_FD_BY_ID",
            "BPF_LINK_GET_NEXT_ID",
            "BPF_ENABLE_STATS",
            "BPF_ITER_CREATE",
            "BPF_LINK_DETACH",
            "BPF_PROG_BIND_MAP",
            "BPF_TOKEN_CREATE",
        ];
        NAMES[self as usize]
    }
}

/// `BPF_MAP_CREATE`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapCreate {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    /// `map_name`, up to the first NUL.
    pub name: String,
    pub map_ifindex: u32,
    pub btf_fd: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub map_extra: u64,
}

/// `BPF_MAP_{LOOKUP,UPDATE,DELETE}_ELEM`, `GET_NEXT_KEY`,
/// `LOOKUP_AND_DELETE_ELEM`, `FREEZE`: `value` is `next_key` for GET_NEXT_KEY.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapElem {
    pub map_fd: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// The four batch operations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapBatch {
    pub in_batch: u64,
    pub out_batch: u64,
    pub keys: u64,
    pub values: u64,
    /// In: elements the buffers hold; out: elements processed.
    pub count: Cell<u32>,
    pub map_fd: u32,
    pub elem_flags: u64,
    pub flags: u64,
}

/// `BPF_PROG_LOAD`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgLoad {
    pub prog_type: u32,
    pub insn_cnt: u32,
    pub insns: u64,
    pub license: u64,
    pub log_level: u32,
    pub log_size: u32,
    pub log_buf: u64,
    pub kern_version: u32,
    pub prog_flags: u32,
    pub name: String,
    pub prog_ifindex: u32,
    pub expected_attach_type: u32,
    pub prog_btf_fd: u32,
    pub func_info_rec_size: u32,
    pub func_info: u64,
    pub func_info_cnt: u32,
    pub line_info_rec_size: u32,
    pub line_info: u64,
    pub line_info_cnt: u32,
    pub attach_btf_id: u32,
    pub attach_prog_fd: u32,
    pub core_relo_cnt: u32,
    pub fd_array: u64,
    pub core_relos: u64,
    pub core_relo_rec_size: u32,
    /// Out: the log size the whole verifier output needs.
    pub log_true_size: Cell<u32>,
}

/// `BPF_OBJ_PIN` / `BPF_OBJ_GET`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjPath {
    pub pathname: u64,
    pub bpf_fd: u32,
    pub file_flags: u32,
    pub path_fd: u32,
}

/// `BPF_PROG_TEST_RUN`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestRun {
    pub prog_fd: u32,
    pub retval: Cell<u32>,
    pub data_size_in: u32,
    pub data_size_out: Cell<u32>,
    pub data_in: u64,
    pub data_out: u64,
    pub repeat: u32,
    pub duration: Cell<u32>,
    pub ctx_size_in: u32,
    pub ctx_size_out: Cell<u32>,
    pub ctx_in: u64,
    pub ctx_out: u64,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
}

/// What an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    Prog,
    Map,
    Btf,
    Link,
}

/// `BPF_{PROG,MAP,BTF,LINK}_GET_NEXT_ID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetNextId {
    pub kind: IdKind,
    pub start_id: u32,
    pub next_id: Cell<u32>,
    pub open_flags: u32,
}

/// `BPF_TASK_FD_QUERY`: what the perf event (or raw tracepoint link) at
/// `fd` of process `pid` runs: the kernel writes `buf_len` (the name's
/// length), the name into `buf`, `prog_id`, `fd_type` (`BPF_FD_TYPE_*`),
/// `probe_offset` and `probe_addr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFdQuery {
    pub pid: u32,
    pub fd: u32,
    pub flags: u32,
    pub buf_len: Cell<u32>,
    pub buf: u64,
    pub prog_id: Cell<u32>,
    pub fd_type: Cell<u32>,
    pub probe_offset: Cell<u64>,
    pub probe_addr: Cell<u64>,
}

/// `BPF_{PROG,MAP,BTF,LINK}_GET_FD_BY_ID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetFdById {
    pub kind: IdKind,
    pub id: u32,
    pub open_flags: u32,
}

/// `BPF_OBJ_GET_INFO_BY_FD`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetInfo {
    pub bpf_fd: u32,
    /// In: bytes at `info`; out: bytes written.
    pub info_len: Cell<u32>,
    pub info: u64,
}

/// `BPF_BTF_LOAD`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtfLoad {
    pub btf: u64,
    pub btf_log_buf: u64,
    pub btf_size: u32,
    pub btf_log_size: u32,
    pub btf_log_level: u32,
    pub btf_log_true_size: Cell<u32>,
}

/// A decoded `bpf()` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    MapCreate(MapCreate),
    MapLookupElem(MapElem),
    MapUpdateElem(MapElem),
    MapDeleteElem(MapElem),
    MapGetNextKey(MapElem),
    MapLookupAndDeleteElem(MapElem),
    MapFreeze(MapElem),
    MapBatch(Cmd, MapBatch),
    ProgLoad(ProgLoad),
    ObjPin(ObjPath),
    ObjGet(ObjPath),
    ProgTestRun(TestRun),
    GetNextId(GetNextId),
    GetFdById(GetFdById),
    ObjGetInfoByFd(GetInfo),
    BtfLoad(BtfLoad),
    /// `BPF_ENABLE_STATS` with its `type`.
    EnableStats(u32),
    TaskFdQuery(TaskFdQuery),
    /// A command bpfjet does not decode: the raw attr bytes, for the
    /// kernel backend to pass through and others to refuse.
    Other(Cmd, Vec<u8>),
}

impl Command {
    pub fn cmd(&self) -> Cmd {
        match self {
            Command::MapCreate(_) => Cmd::MapCreate,
            Command::MapLookupElem(_) => Cmd::MapLookupElem,
            Command::MapUpdateElem(_) => Cmd::MapUpdateElem,
            Command::MapDeleteElem(_) => Cmd::MapDeleteElem,
            Command::MapGetNextKey(_) => Cmd::MapGetNextKey,
            Command::MapLookupAndDeleteElem(_) => Cmd::MapLookupAndDeleteElem,
            Command::MapFreeze(_) => Cmd::MapFreeze,
            Command::MapBatch(c, _) => *c,
            Command::ProgLoad(_) => Cmd::ProgLoad,
            Command::ObjPin(_) => Cmd::ObjPin,
            Command::ObjGet(_) => Cmd::ObjGet,
            Command::ProgTestRun(_) => Cmd::ProgTestRun,
            Command::GetNextId(g) => match g.kind {
                IdKind::Prog => Cmd::ProgGetNextId,
                IdKind::Map => Cmd::MapGetNextId,
                IdKind::Btf => Cmd::BtfGetNextId,
                IdKind::Link => Cmd::LinkGetNextId,
            },
            Command::GetFdById(g) => match g.kind {
                IdKind::Prog => Cmd::ProgGetFdById,
                IdKind::Map => Cmd::MapGetFdById,
                IdKind::Btf => Cmd::BtfGetFdById,
                IdKind::Link => Cmd::LinkGetFdById,
            },
            Command::ObjGetInfoByFd(_) => Cmd::ObjGetInfoByFd,
            Command::BtfLoad(_) => Cmd::BtfLoad,
            Command::EnableStats(_) => Cmd::EnableStats,
            Command::TaskFdQuery(_) => Cmd::TaskFdQuery,
            Command::Other(c, _) => *c,
        }
    }
}
