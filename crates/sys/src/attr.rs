//! `union bpf_attr` ⇄ [`Command`], with the kernel's size rules.
//!
//! The kernel copies `min(size, sizeof(attr))` bytes and refuses a larger
//! attr whose extra bytes are not all zero (`E2BIG`, so newer programs fail
//! cleanly on older kernels); each command then refuses non-zero bytes after
//! its last field (`EINVAL`, `CHECK_ATTR`). Offsets are those of the UAPI
//! header (`linux/bpf.h`).

use crate::command::*;
use crate::errno::Errno;
use std::cell::Cell;

/// Bytes of `union bpf_attr` bpfjet understands (up to `log_true_size`
/// of `BPF_PROG_LOAD`).
pub const ATTR_SIZE: usize = 144;
const PAGE_SIZE: usize = 4096;

struct Attr<'a>(&'a [u8]);

impl Attr<'_> {
    fn u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().unwrap())
    }
    fn u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.0[off..off + 8].try_into().unwrap())
    }
    /// An object name as the kernel takes it (`bpf_obj_name_cpy`): NUL
    /// within 16 bytes, only letters, digits, `_` and `.`.
    fn name(&self, off: usize) -> Result<String, Errno> {
        let raw = &self.0[off..off + 16];
        let end = raw.iter().position(|&b| b == 0).ok_or(Errno::EINVAL)?;
        let name = &raw[..end];
        if !name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            return Err(Errno::EINVAL);
        }
        Ok(String::from_utf8_lossy(name).into_owned())
    }
}

struct AttrMut(Vec<u8>);

impl AttrMut {
    fn u32(&mut self, off: usize, v: u32) {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn u64(&mut self, off: usize, v: u64) {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }
    fn name(&mut self, off: usize, name: &str) {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
    }
}

/// Where each command's fields end (`CHECK_ATTR`'s last field).
fn fields_end(cmd: Cmd) -> usize {
    use Cmd::*;
    match cmd {
        MapCreate => 72,
        MapLookupElem | MapUpdateElem | MapLookupAndDeleteElem => 32,
        MapDeleteElem => 16,
        MapGetNextKey => 24,
        MapFreeze => 4,
        MapLookupBatch | MapLookupAndDeleteBatch | MapUpdateBatch | MapDeleteBatch => 56,
        ProgLoad => 144,
        ObjPin | ObjGet => 20,
        ProgTestRun => 76,
        ProgGetNextId | MapGetNextId | BtfGetNextId | LinkGetNextId => 8,
        MapGetFdById => 12,
        ProgGetFdById | BtfGetFdById | LinkGetFdById => 4,
        ObjGetInfoByFd => 16,
        BtfLoad => 32,
        EnableStats => 4,
        TaskFdQuery => 48,
        _ => ATTR_SIZE,
    }
}

/// Decode the caller's `attr` (its first `size` bytes, as passed to
/// `bpf()`): `E2BIG` for an attr longer than a page or longer than bpfjet
/// understands with a non-zero tail, `EINVAL` for an unknown command or
/// non-zero bytes after the command's last field.
pub fn decode(cmd: u32, attr: &[u8]) -> Result<Command, Errno> {
    if attr.len() > PAGE_SIZE {
        return Err(Errno::E2BIG);
    }
    if attr.len() > ATTR_SIZE && attr[ATTR_SIZE..].iter().any(|&b| b != 0) {
        return Err(Errno::E2BIG);
    }
    let cmd = Cmd::from_raw(cmd).ok_or(Errno::EINVAL)?;
    let mut buf = [0u8; ATTR_SIZE];
    let n = attr.len().min(ATTR_SIZE);
    buf[..n].copy_from_slice(&attr[..n]);
    // Only the caller's bytes can be non-zero (libbpf passes exactly the
    // command's size, so this is usually empty: it is on every map call).
    let end = fields_end(cmd).min(n);
    if attr[end..n].iter().any(|&b| b != 0) {
        return Err(Errno::EINVAL);
    }
    let a = Attr(&buf);
    let elem = || MapElem {
        map_fd: a.u32(0),
        key: a.u64(8),
        value: a.u64(16),
        flags: a.u64(24),
    };
    let next_id = |kind| {
        Command::GetNextId(GetNextId {
            kind,
            start_id: a.u32(0),
            next_id: Cell::new(a.u32(4)),
            open_flags: a.u32(8),
        })
    };
    let by_id = |kind| {
        Command::GetFdById(GetFdById {
            kind,
            id: a.u32(0),
            open_flags: a.u32(8),
        })
    };
    use Cmd as C;
    Ok(match cmd {
        C::MapCreate => Command::MapCreate(MapCreate {
            map_type: a.u32(0),
            key_size: a.u32(4),
            value_size: a.u32(8),
            max_entries: a.u32(12),
            map_flags: a.u32(16),
            inner_map_fd: a.u32(20),
            numa_node: a.u32(24),
            name: a.name(28)?,
            map_ifindex: a.u32(44),
            btf_fd: a.u32(48),
            btf_key_type_id: a.u32(52),
            btf_value_type_id: a.u32(56),
            btf_vmlinux_value_type_id: a.u32(60),
            map_extra: a.u64(64),
        }),
        C::MapLookupElem => Command::MapLookupElem(elem()),
        C::MapUpdateElem => Command::MapUpdateElem(elem()),
        C::MapDeleteElem => Command::MapDeleteElem(elem()),
        C::MapGetNextKey => Command::MapGetNextKey(elem()),
        C::MapLookupAndDeleteElem => Command::MapLookupAndDeleteElem(elem()),
        C::MapFreeze => Command::MapFreeze(elem()),
        C::MapLookupBatch | C::MapLookupAndDeleteBatch | C::MapUpdateBatch | C::MapDeleteBatch => {
            Command::MapBatch(
                cmd,
                MapBatch {
                    in_batch: a.u64(0),
                    out_batch: a.u64(8),
                    keys: a.u64(16),
                    values: a.u64(24),
                    count: Cell::new(a.u32(32)),
                    map_fd: a.u32(36),
                    elem_flags: a.u64(40),
                    flags: a.u64(48),
                },
            )
        }
        C::ProgLoad => Command::ProgLoad(ProgLoad {
            prog_type: a.u32(0),
            insn_cnt: a.u32(4),
            insns: a.u64(8),
            license: a.u64(16),
            log_level: a.u32(24),
            log_size: a.u32(28),
            log_buf: a.u64(32),
            kern_version: a.u32(40),
            prog_flags: a.u32(44),
            name: a.name(48)?,
            prog_ifindex: a.u32(64),
            expected_attach_type: a.u32(68),
            prog_btf_fd: a.u32(72),
            func_info_rec_size: a.u32(76),
            func_info: a.u64(80),
            func_info_cnt: a.u32(88),
            line_info_rec_size: a.u32(92),
            line_info: a.u64(96),
            line_info_cnt: a.u32(104),
            attach_btf_id: a.u32(108),
            attach_prog_fd: a.u32(112),
            core_relo_cnt: a.u32(116),
            fd_array: a.u64(120),
            core_relos: a.u64(128),
            core_relo_rec_size: a.u32(136),
            log_true_size: Cell::new(a.u32(140)),
        }),
        C::ObjPin | C::ObjGet => {
            let p = ObjPath {
                pathname: a.u64(0),
                bpf_fd: a.u32(8),
                file_flags: a.u32(12),
                path_fd: a.u32(16),
            };
            if cmd == C::ObjPin {
                Command::ObjPin(p)
            } else {
                Command::ObjGet(p)
            }
        }
        C::ProgTestRun => Command::ProgTestRun(TestRun {
            prog_fd: a.u32(0),
            retval: Cell::new(a.u32(4)),
            data_size_in: a.u32(8),
            data_size_out: Cell::new(a.u32(12)),
            data_in: a.u64(16),
            data_out: a.u64(24),
            repeat: a.u32(32),
            duration: Cell::new(a.u32(36)),
            ctx_size_in: a.u32(40),
            ctx_size_out: Cell::new(a.u32(44)),
            ctx_in: a.u64(48),
            ctx_out: a.u64(56),
            flags: a.u32(64),
            cpu: a.u32(68),
            batch_size: a.u32(72),
        }),
        C::ProgGetNextId => next_id(IdKind::Prog),
        C::MapGetNextId => next_id(IdKind::Map),
        C::BtfGetNextId => next_id(IdKind::Btf),
        C::LinkGetNextId => next_id(IdKind::Link),
        C::ProgGetFdById => by_id(IdKind::Prog),
        C::MapGetFdById => by_id(IdKind::Map),
        C::BtfGetFdById => by_id(IdKind::Btf),
        C::LinkGetFdById => by_id(IdKind::Link),
        C::ObjGetInfoByFd => Command::ObjGetInfoByFd(GetInfo {
            bpf_fd: a.u32(0),
            info_len: Cell::new(a.u32(4)),
            info: a.u64(8),
        }),
        C::BtfLoad => Command::BtfLoad(BtfLoad {
            btf: a.u64(0),
            btf_log_buf: a.u64(8),
            btf_size: a.u32(16),
            btf_log_size: a.u32(20),
            btf_log_level: a.u32(24),
            btf_log_true_size: Cell::new(a.u32(28)),
        }),
        C::EnableStats => Command::EnableStats(a.u32(0)),
        C::TaskFdQuery => Command::TaskFdQuery(TaskFdQuery {
            pid: a.u32(0),
            fd: a.u32(4),
            flags: a.u32(8),
            buf_len: Cell::new(a.u32(12)),
            buf: a.u64(16),
            prog_id: Cell::new(a.u32(24)),
            fd_type: Cell::new(a.u32(28)),
            probe_offset: Cell::new(a.u64(32)),
            probe_addr: Cell::new(a.u64(40)),
        }),
        other => Command::Other(other, buf[..n].to_vec()),
    })
}

/// Encode a command as the kernel reads it (`ATTR_SIZE` bytes, or the raw
/// bytes of an `Other` command).
pub fn encode(cmd: &Command) -> Vec<u8> {
    let mut a = AttrMut(vec![0u8; ATTR_SIZE]);
    let elem = |a: &mut AttrMut, e: &MapElem| {
        a.u32(0, e.map_fd);
        a.u64(8, e.key);
        a.u64(16, e.value);
        a.u64(24, e.flags);
    };
    match cmd {
        Command::MapCreate(m) => {
            a.u32(0, m.map_type);
            a.u32(4, m.key_size);
            a.u32(8, m.value_size);
            a.u32(12, m.max_entries);
            a.u32(16, m.map_flags);
            a.u32(20, m.inner_map_fd);
            a.u32(24, m.numa_node);
            a.name(28, &m.name);
            a.u32(44, m.map_ifindex);
            a.u32(48, m.btf_fd);
            a.u32(52, m.btf_key_type_id);
            a.u32(56, m.btf_value_type_id);
            a.u32(60, m.btf_vmlinux_value_type_id);
            a.u64(64, m.map_extra);
        }
        Command::MapLookupElem(e)
        | Command::MapUpdateElem(e)
        | Command::MapDeleteElem(e)
        | Command::MapGetNextKey(e)
        | Command::MapLookupAndDeleteElem(e) => elem(&mut a, e),
        Command::MapFreeze(e) => a.u32(0, e.map_fd),
        Command::MapBatch(_, b) => {
            a.u64(0, b.in_batch);
            a.u64(8, b.out_batch);
            a.u64(16, b.keys);
            a.u64(24, b.values);
            a.u32(32, b.count.get());
            a.u32(36, b.map_fd);
            a.u64(40, b.elem_flags);
            a.u64(48, b.flags);
        }
        Command::ProgLoad(p) => {
            a.u32(0, p.prog_type);
            a.u32(4, p.insn_cnt);
            a.u64(8, p.insns);
            a.u64(16, p.license);
            a.u32(24, p.log_level);
            a.u32(28, p.log_size);
            a.u64(32, p.log_buf);
            a.u32(40, p.kern_version);
            a.u32(44, p.prog_flags);
            a.name(48, &p.name);
            a.u32(64, p.prog_ifindex);
            a.u32(68, p.expected_attach_type);
            a.u32(72, p.prog_btf_fd);
            a.u32(76, p.func_info_rec_size);
            a.u64(80, p.func_info);
            a.u32(88, p.func_info_cnt);
            a.u32(92, p.line_info_rec_size);
            a.u64(96, p.line_info);
            a.u32(104, p.line_info_cnt);
            a.u32(108, p.attach_btf_id);
            a.u32(112, p.attach_prog_fd);
            a.u32(116, p.core_relo_cnt);
            a.u64(120, p.fd_array);
            a.u64(128, p.core_relos);
            a.u32(136, p.core_relo_rec_size);
            a.u32(140, p.log_true_size.get());
        }
        Command::ObjPin(p) | Command::ObjGet(p) => {
            a.u64(0, p.pathname);
            a.u32(8, p.bpf_fd);
            a.u32(12, p.file_flags);
            a.u32(16, p.path_fd);
        }
        Command::ProgTestRun(t) => {
            a.u32(0, t.prog_fd);
            a.u32(4, t.retval.get());
            a.u32(8, t.data_size_in);
            a.u32(12, t.data_size_out.get());
            a.u64(16, t.data_in);
            a.u64(24, t.data_out);
            a.u32(32, t.repeat);
            a.u32(36, t.duration.get());
            a.u32(40, t.ctx_size_in);
            a.u32(44, t.ctx_size_out.get());
            a.u64(48, t.ctx_in);
            a.u64(56, t.ctx_out);
            a.u32(64, t.flags);
            a.u32(68, t.cpu);
            a.u32(72, t.batch_size);
        }
        Command::GetNextId(g) => {
            a.u32(0, g.start_id);
            a.u32(4, g.next_id.get());
            a.u32(8, g.open_flags);
        }
        Command::GetFdById(g) => {
            a.u32(0, g.id);
            a.u32(8, g.open_flags);
        }
        Command::ObjGetInfoByFd(i) => {
            a.u32(0, i.bpf_fd);
            a.u32(4, i.info_len.get());
            a.u64(8, i.info);
        }
        Command::BtfLoad(b) => {
            a.u64(0, b.btf);
            a.u64(8, b.btf_log_buf);
            a.u32(16, b.btf_size);
            a.u32(20, b.btf_log_size);
            a.u32(24, b.btf_log_level);
            a.u32(28, b.btf_log_true_size.get());
        }
        Command::EnableStats(t) => a.u32(0, *t),
        Command::TaskFdQuery(q) => {
            a.u32(0, q.pid);
            a.u32(4, q.fd);
            a.u32(8, q.flags);
            a.u32(12, q.buf_len.get());
            a.u64(16, q.buf);
            a.u32(24, q.prog_id.get());
            a.u32(28, q.fd_type.get());
            a.u64(32, q.probe_offset.get());
            a.u64(40, q.probe_addr.get());
        }
        Command::Other(_, raw) => return raw.clone(),
    }
    a.0
}

/// The fields the kernel writes back into the caller's attr, as
/// `(offset, value)`: what a backend set in the command's `Cell`s.
pub fn outputs(cmd: &Command) -> Vec<(usize, u32)> {
    match cmd {
        Command::MapBatch(_, b) => vec![(32, b.count.get())],
        Command::ProgLoad(p) => vec![(140, p.log_true_size.get())],
        Command::ProgTestRun(t) => vec![
            (4, t.retval.get()),
            (12, t.data_size_out.get()),
            (36, t.duration.get()),
            (44, t.ctx_size_out.get()),
        ],
        Command::GetNextId(g) => vec![(4, g.next_id.get())],
        Command::ObjGetInfoByFd(i) => vec![(4, i.info_len.get())],
        Command::BtfLoad(b) => vec![(28, b.btf_log_true_size.get())],
        Command::TaskFdQuery(q) => {
            let (off, addr) = (q.probe_offset.get(), q.probe_addr.get());
            vec![
                (12, q.buf_len.get()),
                (24, q.prog_id.get()),
                (28, q.fd_type.get()),
                (32, off as u32),
                (36, (off >> 32) as u32),
                (40, addr as u32),
                (44, (addr >> 32) as u32),
            ]
        }
        _ => Vec::new(),
    }
}

/// Store the command's outputs into the caller's attr (only the fields
/// that fit in the `size` the caller passed, as the kernel does).
pub fn write_back(cmd: &Command, attr: &mut [u8]) {
    for (off, v) in outputs(cmd) {
        if off + 4 <= attr.len() {
            attr[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
    }
}

/// Update a command's output fields from an attr the kernel wrote.
pub fn read_back(cmd: &Command, attr: &[u8]) {
    let a = Attr(attr);
    match cmd {
        Command::MapBatch(_, b) => b.count.set(a.u32(32)),
        Command::ProgLoad(p) => p.log_true_size.set(a.u32(140)),
        Command::ProgTestRun(t) => {
            t.retval.set(a.u32(4));
            t.data_size_out.set(a.u32(12));
            t.duration.set(a.u32(36));
            t.ctx_size_out.set(a.u32(44));
        }
        Command::GetNextId(g) => g.next_id.set(a.u32(4)),
        Command::ObjGetInfoByFd(i) => i.info_len.set(a.u32(4)),
        Command::BtfLoad(b) => b.btf_log_true_size.set(a.u32(28)),
        Command::TaskFdQuery(q) => {
            q.buf_len.set(a.u32(12));
            q.prog_id.set(a.u32(24));
            q.fd_type.set(a.u32(28));
            q.probe_offset.set(a.u64(32));
            q.probe_addr.set(a.u64(40));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigger_attr_with_nonzero_tail_is_e2big() {
        let mut attr = vec![0u8; ATTR_SIZE + 8];
        assert!(decode(0, &attr).is_ok());
        attr[ATTR_SIZE + 3] = 1;
        assert_eq!(decode(0, &attr), Err(Errno::E2BIG));
        assert_eq!(decode(0, &vec![0u8; PAGE_SIZE + 1]), Err(Errno::E2BIG));
    }

    #[test]
    fn bytes_after_a_commands_fields_are_einval() {
        let mut attr = vec![0u8; 40];
        attr[36] = 1; // past MAP_LOOKUP_ELEM's flags
        assert_eq!(decode(1, &attr), Err(Errno::EINVAL));
        assert_eq!(decode(999, &[0u8; 8]), Err(Errno::EINVAL));
    }

    #[test]
    fn short_attr_is_zero_extended_and_round_trips() {
        let mut raw = [0u8; 72];
        raw[0] = 1; // hash
        raw[4] = 4;
        raw[8] = 8;
        raw[12] = 16;
        raw[28..31].copy_from_slice(b"abc");
        raw[64] = 3;
        let cmd = decode(0, &raw[..72]).unwrap();
        let Command::MapCreate(m) = &cmd else {
            panic!("{cmd:?}")
        };
        assert_eq!((m.map_type, m.key_size, m.value_size), (1, 4, 8));
        assert_eq!(
            (m.max_entries, m.name.as_str(), m.map_extra),
            (16, "abc", 3)
        );
        assert_eq!(encode(&cmd)[..72], raw[..]);
    }

    #[test]
    fn outputs_are_written_only_within_the_callers_size() {
        let cmd = decode(10, &[0u8; 80]).unwrap();
        let Command::ProgTestRun(t) = &cmd else {
            panic!()
        };
        t.retval.set(2);
        t.duration.set(7);
        let mut attr = vec![0u8; 20];
        write_back(&cmd, &mut attr);
        assert_eq!(attr[4], 2);
        assert_eq!(attr[12], 0);
    }
}
