//! `BPF_PROG_LOAD` through bpfjet's verifier and loader, and
//! `BPF_PROG_TEST_RUN` in bpfjet's interpreter.

use crate::objects::{ProgObj, ProgRecord};
use bpfjet_isa::RawInsn;
use bpfjet_maps::{Instance, Map};
use bpfjet_obj::{FuncInfo, Object, ProgKind, Program};
use bpfjet_runtime::{LoadedObject, ObjectOptions, RuntimeError};
use bpfjet_sys::Errno;
use std::cell::Cell;
use std::sync::{Arc, Mutex};

pub const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const BPF_F_SLEEPABLE: u32 = 1 << 4;
const LD_IMM64: u8 = 0x18;
pub const PSEUDO_MAP_FD: u8 = 1;
pub const PSEUDO_MAP_VALUE: u8 = 2;
pub const PSEUDO_MAP_IDX: u8 = 5;
pub const PSEUDO_MAP_IDX_VALUE: u8 = 6;

/// A refused load: the errno and the text for the verifier log.
pub struct Refusal {
    pub errno: Errno,
    pub log: String,
}

impl Refusal {
    pub fn new(errno: Errno, log: impl Into<String>) -> Refusal {
        Refusal {
            errno,
            log: log.into(),
        }
    }
}

/// Whether a program is straight-line code that never reads its context
/// (r1 is written before any use) and calls nothing: such a program means
/// the same under every program type, so bpfjet's verifier (XDP rules)
/// decides it for any type. libbpf's feature probes (global data: store
/// through a map value pointer) are such programs; bpfjet loads them but
/// runs only XDP programs.
pub fn context_free(words: &[u64]) -> bool {
    const LD: u8 = 0;
    const LDX: u8 = 1;
    const ST: u8 = 2;
    const STX: u8 = 3;
    const ALU: u8 = 4;
    const JMP: u8 = 5;
    const ALU64: u8 = 7;
    const EXIT: u8 = 0x90;
    const MOV: u8 = 0xb0;
    const SRC_X: u8 = 0x08;
    let mut r1_written = false;
    let mut pc = 0;
    while pc < words.len() {
        let b = words[pc].to_le_bytes();
        let (code, dst, src) = (b[0], b[1] & 0xf, b[1] >> 4);
        let class = code & 7;
        let (reads_r1, writes_r1) = match class {
            LD if code == LD_IMM64 => (false, dst == 1),
            LDX => (src == 1, dst == 1),
            ST => (dst == 1, false),
            STX => (dst == 1 || src == 1, false),
            ALU | ALU64 => {
                let src_reads = code & SRC_X != 0 && src == 1;
                let is_mov = code & 0xf0 == MOV;
                (src_reads || (dst == 1 && !is_mov), dst == 1)
            }
            JMP if code == (JMP | EXIT) => (false, false),
            // Branches, calls, legacy packet loads: not straight-line.
            _ => return false,
        };
        if reads_r1 && !r1_written {
            return false;
        }
        r1_written |= writes_r1;
        pc += if code == LD_IMM64 { 2 } else { 1 };
    }
    true
}

/// Unpack raw instruction words.
pub fn raw_insns(words: &[u64]) -> Vec<RawInsn> {
    words
        .iter()
        .map(|w| {
            let b = w.to_le_bytes();
            RawInsn {
                code: b[0],
                dst: b[1] & 0xf,
                src: b[1] >> 4,
                off: i16::from_le_bytes([b[2], b[3]]),
                imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            }
        })
        .collect()
}

/// The `ld_imm64` slots referencing maps: `(slot, src)`.
pub fn map_lddws(words: &[u64]) -> Vec<(usize, u8)> {
    let mut out = Vec::new();
    let mut pc = 0;
    while pc < words.len() {
        let b = words[pc].to_le_bytes();
        if b[0] == LD_IMM64 {
            let src = b[1] >> 4;
            if matches!(
                src,
                PSEUDO_MAP_FD | PSEUDO_MAP_VALUE | PSEUDO_MAP_IDX | PSEUDO_MAP_IDX_VALUE
            ) {
                out.push((pc, src));
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    out
}

/// Point an `ld_imm64` at map index `index` of the program's table.
pub fn set_map_index(word: &mut u64, src: u8, index: u32) {
    let mut b = word.to_le_bytes();
    let new_src = if matches!(src, PSEUDO_MAP_FD | PSEUDO_MAP_IDX) {
        PSEUDO_MAP_IDX
    } else {
        PSEUDO_MAP_IDX_VALUE
    };
    b[1] = (b[1] & 0xf) | (new_src << 4);
    b[4..8].copy_from_slice(&index.to_le_bytes());
    *word = u64::from_le_bytes(b);
}

fn errno_of(e: &RuntimeError) -> Errno {
    match e {
        RuntimeError::Rejected { .. } => Errno::EACCES,
        RuntimeError::Map { .. } => Errno::ENOMEM,
        _ => Errno::EINVAL,
    }
}

/// The name of a record's program in the object built from it.
pub fn program_name(rec: &ProgRecord) -> String {
    if rec.name.is_empty() {
        format!("prog{}", rec.id)
    } else {
        rec.name.clone()
    }
}

/// `bpf_attach_type` of programs in DEVMAP / CPUMAP entries.
pub const BPF_XDP_DEVMAP: u32 = 33;
pub const BPF_XDP_CPUMAP: u32 = 35;

/// The one-program object a record stands for, its maps `maps` (`maps[i]`
/// is `rec.map_ids[i]`).
pub fn object_of(rec: &ProgRecord, maps: &[Arc<Map>]) -> Object {
    let section = if let Some(section) = tracing_section(rec) {
        // Verified for its type; where it runs is known at attach.
        if rec.prog_flags & BPF_F_SLEEPABLE != 0 && section == "uprobe" {
            "uprobe.s".to_string()
        } else {
            section
        }
    } else {
        // A context-free program of another type verifies the same as XDP.
        let base = if rec.prog_flags & BPF_F_XDP_HAS_FRAGS != 0 {
            "xdp.frags"
        } else {
            "xdp"
        };
        // A devmap entry's program may read `egress_ifindex`.
        match (rec.prog_type, rec.expected_attach_type) {
            (BPF_PROG_TYPE_XDP, BPF_XDP_DEVMAP) => format!("{base}/devmap"),
            (BPF_PROG_TYPE_XDP, BPF_XDP_CPUMAP) => format!("{base}/cpumap"),
            _ => base.to_string(),
        }
    };
    let section = section.as_str();
    let kind = ProgKind::from_section(section);
    let name = program_name(rec);
    let specs = maps
        .iter()
        .map(|m| {
            let mut s = m.spec().clone();
            s.frozen = m.is_frozen();
            s
        })
        .collect();
    Object {
        license: rec.license.clone(),
        maps: specs,
        spin_locks: maps.iter().map(|m| m.spin_lock_off()).collect(),
        // Programs loaded through bpf() bring no map-value BTF here yet.
        map_fields: vec![Vec::new(); maps.len()],
        inner_map_fields: Default::default(),
        map_inits: Vec::new(),
        programs: vec![Program {
            name,
            section: section.into(),
            kind,
            insns: raw_insns(&rec.insns),
            func_info: Vec::new(),
            line_info: Vec::new(),
            core_relos: Vec::new(),
            unresolved_core: Vec::new(),
        }],
        kfuncs: rec.kfuncs.clone(),
        weak_kfuncs: rec.weak_kfuncs.clone(),
        btf: None,
    }
}

/// The section a tracing program type is verified as (its context
/// rules and helpers), for the types bpfjet runs in processes:
/// `BPF_PROG_TYPE_KPROBE` (uprobes), `TRACEPOINT`, `RAW_TRACEPOINT` and
/// `PERF_EVENT` (timers, run in the control plane's process).
pub fn tracing_kind(prog_type: u32) -> Option<&'static str> {
    use bpfjet_obj::ProgType;
    match ProgType::from_kernel_id(prog_type)? {
        // Its section names the tracepoint ([`tracing_section`]).
        ProgType::Xdp | ProgType::Tracing => None,
        // Kprobe-type programs run on uprobes here.
        ProgType::Kprobe => Some("uprobe"),
        t => Some(t.name()),
    }
}

/// `BPF_PROG_TYPE_TRACING`.
pub const BPF_PROG_TYPE_TRACING: u32 = 26;

/// The section a tracing program record is verified as: its type's
/// ([`tracing_kind`]), `tp_btf/NAME` for a `tp_btf` program of an XDP
/// tracepoint, `fentry.xdp/FUNC` or `fexit.xdp/FUNC` for an fentry/fexit
/// program on a bpfjet XDP program (`ProgRecord::tracepoint`). None: not
/// a tracing program bpfjet runs.
pub fn tracing_section(rec: &ProgRecord) -> Option<String> {
    use bpfjet_obj::tp_btf::{BPF_TRACE_FENTRY, BPF_TRACE_FEXIT, BPF_TRACE_RAW_TP};
    if rec.prog_type == BPF_PROG_TYPE_TRACING {
        if rec.tracepoint.is_empty() {
            return None;
        }
        let prefix = match rec.expected_attach_type {
            BPF_TRACE_RAW_TP => "tp_btf",
            BPF_TRACE_FENTRY => "fentry.xdp",
            BPF_TRACE_FEXIT => "fexit.xdp",
            _ => return None,
        };
        return Some(format!("{prefix}/{}", rec.tracepoint));
    }
    tracing_kind(rec.prog_type).map(str::to_string)
}

/// Verify and bind a program record to its maps (`maps[i]` is
/// `rec.map_ids[i]`). `instance` resolves inner maps of map-in-map values;
/// `btf` is the program's and its maps' (`crate::prog_btf`).
pub fn build(
    rec: &ProgRecord,
    maps: &[Arc<Map>],
    instance: Instance,
    btf: crate::prog_btf::ProgBtf,
) -> Result<LoadedObject, Refusal> {
    // An EXT program is verified under its target's type (XDP).
    if rec.prog_type != BPF_PROG_TYPE_XDP
        && rec.prog_type != crate::freplace::BPF_PROG_TYPE_EXT
        && tracing_section(rec).is_none()
        && !context_free(&rec.insns)
    {
        return Err(Refusal::new(
            Errno::EINVAL,
            format!(
                "bpfjet runs XDP, kprobe (uprobes), tracepoint, raw tracepoint, perf_event \
                 and tp_btf (XDP tracepoints) programs only \
                 (program type {})",
                rec.prog_type
            ),
        ));
    }
    let mut object = object_of(rec, maps);
    object.btf = btf.btf;
    object.map_fields = btf.map_fields;
    // The loader's `func_info` names the subprograms' BTF `FUNC`s: their
    // linkage makes global ones verified on their own, from their
    // prototypes, as the kernel verifies them.
    object.programs[0].func_info = rec
        .func_info
        .iter()
        .map(|&(off, type_id)| FuncInfo {
            slot: off as usize,
            name: object
                .btf
                .as_ref()
                .and_then(|b| b.type_by_id(type_id))
                .map(|t| t.name().to_string())
                .unwrap_or_default(),
            btf_type_id: Some(type_id),
        })
        .collect();
    build_object(&object, maps, instance)
}

/// Verify and bind an object whose map table is `maps` (in order).
pub fn build_object(
    obj: &Object,
    maps: &[Arc<Map>],
    instance: Instance,
) -> Result<LoadedObject, Refusal> {
    let opts = ObjectOptions {
        ncpus: instance.ncpus() as usize,
        ..ObjectOptions::default()
    };
    // load_in asks for each of the object's maps in order: hand out the
    // existing maps instead of creating new ones.
    let next = Cell::new(0usize);
    let reuse = |_: &bpfjet_maps::MapSpec| {
        let i = next.get();
        next.set(i + 1);
        maps.get(i).cloned()
    };
    let (loaded, _) = LoadedObject::load_in(obj, &opts, instance, &reuse).map_err(|e| {
        let log = match &e {
            RuntimeError::Rejected { report, .. } => report.clone(),
            other => other.to_string(),
        };
        Refusal::new(errno_of(&e), log)
    })?;
    Ok(loaded)
}

pub fn prog_obj(rec: ProgRecord, loaded: LoadedObject) -> ProgObj {
    ProgObj {
        rec,
        loaded,
        run_time_ns: Mutex::new((0, 0)),
    }
}

/// Point a `PSEUDO_MAP_IDX(_VALUE)` `ld_imm64` at a map id the way the
/// kernel's xlated dump does (`PSEUDO_MAP_FD`/`PSEUDO_MAP_VALUE`, imm = id).
pub fn set_map_ref(word: &mut u64, src: u8, id: u32) {
    let mut b = word.to_le_bytes();
    let new_src = if matches!(src, PSEUDO_MAP_FD | PSEUDO_MAP_IDX) {
        PSEUDO_MAP_FD
    } else {
        PSEUDO_MAP_VALUE
    };
    b[1] = (b[1] & 0xf) | (new_src << 4);
    b[4..8].copy_from_slice(&id.to_le_bytes());
    *word = u64::from_le_bytes(b);
}

/// The kernel's program tag: the first 8 bytes of the digest of the
/// instructions as the loader passed them, with the immediates of map
/// references by fd cleared (`PSEUDO_MAP_FD`/`PSEUDO_MAP_VALUE` and the
/// second slot after them, if it is a plain one), as the kernel's
/// `bpf_prog_calc_tag` does before it resolves them. References by
/// `fd_array` index keep their index, as in the kernel. The digest is the
/// running kernel's: SHA-256 from Linux 6.18 (where program signing made
/// it the program's digest), SHA-1 before.
pub fn tag(words: &[u64]) -> [u8; 8] {
    tag_with(words, kernel_tags_with_sha256())
}

fn tag_with(words: &[u64], sha256: bool) -> [u8; 8] {
    use sha1::Digest;
    let mut bytes = Vec::with_capacity(words.len() * 8);
    let mut after_map_fd = false;
    for w in words {
        let mut b = w.to_le_bytes();
        if !after_map_fd
            && b[0] == LD_IMM64
            && matches!(b[1] >> 4, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE)
        {
            after_map_fd = true;
            b[4..8].fill(0);
        } else if after_map_fd && b[..4] == [0, 0, 0, 0] {
            after_map_fd = false;
            b[4..8].fill(0);
        } else {
            after_map_fd = false;
        }
        bytes.extend_from_slice(&b);
    }
    let mut t = [0u8; 8];
    if sha256 {
        t.copy_from_slice(&sha2::Sha256::digest(&bytes)[..8]);
    } else {
        t.copy_from_slice(&sha1::Sha1::digest(&bytes)[..8]);
    }
    t
}

/// Whether the running kernel is 6.18 or later (`uname -r`).
fn kernel_tags_with_sha256() -> bool {
    static SHA256: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SHA256.get_or_init(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release
            .trim()
            .split(|c: char| !c.is_ascii_digit())
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(0);
        let minor = parts.next().unwrap_or(0);
        (major, minor) >= (6, 18)
    })
}

#[cfg(test)]
mod tests {
    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
        let mut b = [0u8; 8];
        b[0] = code;
        b[1] = dst | (src << 4);
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..].copy_from_slice(&imm.to_le_bytes());
        u64::from_le_bytes(b)
    }

    #[test]
    fn context_free_programs() {
        // libbpf's global-data probe: r1 = map value; *(u64 *)r1 = 42; r0 = 0; exit
        let probe = [
            insn(0x18, 1, 2, 0, 3),
            insn(0, 0, 0, 0, 16),
            insn(0x7a, 1, 0, 0, 42),
            insn(0xb7, 0, 0, 0, 0),
            insn(0x95, 0, 0, 0, 0),
        ];
        assert!(super::context_free(&probe));
        // Reads the context first.
        let reads_ctx = [insn(0x61, 0, 1, 0, 0), insn(0x95, 0, 0, 0, 0)];
        assert!(!super::context_free(&reads_ctx));
        // A helper call.
        let calls = [insn(0x85, 0, 0, 0, 1), insn(0x95, 0, 0, 0, 0)];
        assert!(!super::context_free(&calls));
    }

    #[test]
    fn tag_ignores_map_references() {
        // r1 = map fd 3 / map fd 7; r0 = 0; exit: the same tag whatever the
        // fd, as the kernel clears map immediates before hashing.
        let prog = |fd: i32| {
            [
                insn(0x18, 1, 1, 0, fd),
                insn(0, 0, 0, 0, 0),
                insn(0xb7, 0, 0, 0, 0),
                insn(0x95, 0, 0, 0, 0),
            ]
        };
        assert_eq!(super::tag(&prog(3)), super::tag(&prog(7)));
        // `r0 = 2; exit`: 614b434cd8324ecc is the tag Linux 6.18 gave it
        // (bpftool prog show); 3b185187f1855c4c is the first 8 bytes of
        // its SHA-1, the older kernels' rule.
        let pass = [insn(0xb7, 0, 0, 0, 2), insn(0x95, 0, 0, 0, 0)];
        assert_eq!(
            super::tag_with(&pass, true),
            0x614b434cd8324eccu64.to_be_bytes()
        );
        assert_eq!(
            super::tag_with(&pass, false),
            0x3b185187f1855c4cu64.to_be_bytes()
        );
        let other = [insn(0xb7, 0, 0, 0, 1), insn(0x95, 0, 0, 0, 0)];
        assert_ne!(super::tag(&prog(3)), super::tag(&other));
    }
}
