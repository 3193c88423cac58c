//! `BPF_PROG_TEST_RUN` of an XDP program through both backends — the
//! kernel's `bpf()` and bpfjet's — on random attributes: data sizes (none,
//! shorter than an Ethernet header, up to and past the linear part and the
//! largest frame), output buffers too small or absent, an `xdp_md` context
//! in (data, data_end, data_meta, ingress_ifindex, rx_queue_index,
//! egress_ifindex, each right or wrong) and out, repeat, flags and CPU.
//! Each call's errno, retval and every byte and size written back must be
//! the kernel's. This is what `bpftool prog run` and libbpf's
//! `bpf_prog_test_run_opts` see.

mod common;
use common::insn;

use bpfjet_sys::{decode, encode, Backend, Command, Errno, KernelBackend, ProgLoad, TestRun};

const XDP: u32 = 6;

/// The frame length, the metadata length, ingress_ifindex and
/// rx_queue_index, folded into the return value.
fn context_echo() -> Vec<u64> {
    vec![
        insn(0x61, 2, 1, 0, 0),  // r2 = ctx->data
        insn(0x61, 3, 1, 4, 0),  // r3 = ctx->data_end
        insn(0xbf, 0, 3, 0, 0),  // r0 = r3
        insn(0x1f, 0, 2, 0, 0),  // r0 -= r2: the frame's length
        insn(0x61, 4, 1, 12, 0), // r4 = ctx->ingress_ifindex
        insn(0x67, 4, 0, 0, 20), // r4 <<= 20
        insn(0x0f, 0, 4, 0, 0),  // r0 += r4
        insn(0x61, 4, 1, 16, 0), // r4 = ctx->rx_queue_index
        insn(0x67, 4, 0, 0, 28), // r4 <<= 28
        insn(0x0f, 0, 4, 0, 0),  // r0 += r4
        insn(0x61, 4, 1, 8, 0),  // r4 = ctx->data_meta
        insn(0x1f, 2, 4, 0, 0),  // r2 -= r4: the metadata's length
        insn(0x67, 2, 0, 0, 12), // r2 <<= 12
        insn(0x0f, 0, 2, 0, 0),  // r0 += r2
        insn(0x95, 0, 0, 0, 0),  // exit
    ]
}

fn load(backend: &dyn Backend, frags: bool) -> i64 {
    let license = c"GPL";
    let insns = context_echo();
    common::run(
        backend,
        Command::ProgLoad(ProgLoad {
            prog_type: XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            name: "echo".into(),
            // BPF_F_XDP_HAS_FRAGS
            prog_flags: if frags { 1 << 5 } else { 0 },
            ..ProgLoad::default()
        }),
    )
    .expect("the program loads")
}

/// One call's attributes.
#[derive(Clone, Debug)]
struct Call {
    frags: bool,
    data: Vec<u8>,
    out: Option<usize>,
    ctx: Option<[u32; 8]>,
    ctx_size_in: u32,
    ctx_out: Option<u32>,
    repeat: u32,
    flags: u32,
    cpu: u32,
}

fn calls(seed: u64, n: usize) -> Vec<Call> {
    let mut next = bpfjet_testsupport::xorshift(seed);
    const SIZES: &[usize] = &[0, 1, 13, 14, 60, 1500, 3520, 3521, 4000, 9000, 73_000];
    (0..n)
        .map(|_| {
            let r = next();
            let len = SIZES[(r % SIZES.len() as u64) as usize];
            let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ r) as u8).collect();
            let out = match (r >> 8) % 5 {
                0 => None,
                1 => Some(10),
                2 => Some(len / 2),
                _ => Some(len + 256),
            };
            let pick =
                |s: u32, choices: &[u32]| choices[((r >> s) % choices.len() as u64) as usize];
            let ctx = (!(r >> 12).is_multiple_of(3)).then(|| {
                let linear = len.min(3520) as u32;
                [
                    pick(16, &[0, 0, 0, 4, 8, 6, 220]),             // data (metadata)
                    pick(18, &[linear, linear, len as u32, 14, 0]), // data_end
                    pick(21, &[0, 0, 0, 0, 0, 4]),                  // data_meta
                    pick(23, &[0, 0, 1, 1, 99_999]),                // ingress_ifindex
                    pick(26, &[0, 0, 0, 1]),                        // rx_queue_index
                    pick(28, &[0, 0, 0, 1]),                        // egress_ifindex
                    0,
                    pick(50, &[0, 0, 0, 7]), // past struct xdp_md: must be 0
                ]
            });
            Call {
                frags: (r >> 30).is_multiple_of(2),
                data,
                out,
                ctx,
                ctx_size_in: ctx.map_or(0, |_| pick(32, &[24, 24, 24, 20, 32, 0])),
                ctx_out: ((r >> 35).is_multiple_of(3)).then(|| pick(37, &[24, 24, 8, 32])),
                repeat: pick(40, &[0, 0, 1, 3]),
                // Not BPF_F_TEST_XDP_LIVE_FRAMES: bpfjet does not transmit.
                flags: pick(43, &[0, 0, 0, 0, 1, 4]),
                cpu: pick(46, &[0, 0, 0, 1]),
            }
        })
        .collect()
}

/// What one call answered, and every byte it wrote back.
fn run(backend: &dyn Backend, fds: [i64; 2], c: &Call) -> String {
    let mut out = vec![0xeeu8; c.out.unwrap_or(0)];
    let mut ctx_out = [0xeeu8; 32];
    let ctx = c.ctx.unwrap_or_default();
    let t = TestRun {
        prog_fd: fds[usize::from(c.frags)] as u32,
        data_size_in: c.data.len() as u32,
        data_in: if c.data.is_empty() {
            0
        } else {
            c.data.as_ptr() as u64
        },
        data_out: c.out.map_or(0, |_| out.as_mut_ptr() as u64),
        data_size_out: std::cell::Cell::new(c.out.unwrap_or(0) as u32),
        ctx_in: c.ctx.map_or(0, |_| ctx.as_ptr() as u64),
        ctx_size_in: c.ctx_size_in,
        ctx_out: c.ctx_out.map_or(0, |_| ctx_out.as_mut_ptr() as u64),
        ctx_size_out: std::cell::Cell::new(c.ctx_out.unwrap_or(0)),
        repeat: c.repeat,
        flags: c.flags,
        cpu: c.cpu,
        ..TestRun::default()
    };
    let cmd = Command::ProgTestRun(t);
    let raw = encode(&cmd);
    let decoded = decode(cmd.cmd() as u32, &raw).expect("decodes");
    let r: Result<i64, Errno> = backend.execute(&decoded);
    let Command::ProgTestRun(t) = &decoded else {
        unreachable!()
    };
    match r {
        Err(e) => format!("{e:?}"),
        Ok(_) => {
            let n = (t.data_size_out.get() as usize).min(out.len());
            let m = (t.ctx_size_out.get() as usize).min(ctx_out.len());
            format!(
                "ok retval {:#x} data_size_out {} out {:02x?} ctx_size_out {} ctx_out {:02x?}",
                t.retval.get(),
                t.data_size_out.get(),
                &out[..n],
                t.ctx_size_out.get(),
                &ctx_out[..m]
            )
        }
    }
}

#[test]
fn xdp_test_run_attributes_match_the_kernel() {
    if !common::kernel_backend_usable() {
        return;
    }
    let jet_ns = common::JetNs::open("xdpattrs");
    let jet = &jet_ns.backend;
    let kernel_fds = [load(&KernelBackend, false), load(&KernelBackend, true)];
    let jet_fds = [load(jet, false), load(jet, true)];
    let mut differences = Vec::new();
    let mut answers = std::collections::BTreeMap::new();
    for (i, c) in calls(0x1357_9bdf_0246, 4000).iter().enumerate() {
        let k = run(&KernelBackend, kernel_fds, c);
        let j = run(jet, jet_fds, c);
        *answers
            .entry(k.split(' ').next().unwrap_or("").to_string())
            .or_insert(0) += 1;
        if k != j {
            differences.push(format!(
                "call {i} (frags {}, {} bytes, out {:?}, ctx {:?} size {}, ctx_out {:?}, repeat {}, flags {}, cpu {}):\n  kernel {}\n  bpfjet {}",
                c.frags,
                c.data.len(),
                c.out,
                c.ctx,
                c.ctx_size_in,
                c.ctx_out,
                c.repeat,
                c.flags,
                c.cpu,
                &k[..k.len().min(300)],
                &j[..j.len().min(300)]
            ));
        }
    }
    drop(jet_ns);
    assert!(
        differences.is_empty(),
        "{} differences, the first:\n{}",
        differences.len(),
        differences[..differences.len().min(8)].join("\n")
    );
    assert!(answers.len() >= 3, "{answers:?}");
}
