//! Loads and stores of every size, sign-extending loads, lddw relocation
//! kinds, and load-time refusals.

mod common;

use bpfjet_isa::{AluOp, CallTarget, Insn, LdDwKind, Size, Size::*, Width};
use bpfjet_runtime::*;
use common::*;

#[test]
fn loads_of_every_size_from_memory() {
    let mem: Vec<u8> = (1..=16).collect();
    let cases = [
        (B, 0x01),
        (H, 0x0201),
        (W, 0x0403_0201),
        (DW, 0x0807_0605_0403_0201),
    ];
    for (size, want) in cases {
        let p = P::new().ldx(size, 0, 1, 0).exit().build();
        assert_eq!(run_both_mem(p, &mem).0, want, "{size:?}");
    }
    // Unaligned and with an offset.
    let p = P::new().ldx(W, 0, 1, 3).exit().build();
    assert_eq!(run_both_mem(p, &mem).0, 0x0706_0504);
}

#[test]
fn sign_extending_loads() {
    let mem = [0x80, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0];
    let cases = [
        (B, 0, 0xffff_ffff_ffff_ff80),
        (H, 0, 0xffff_ffff_ffff_ff80),
        (W, 0, 0xffff_ffff_ffff_ff80),
        (B, 4, 0x7f),
        (W, 4, 0x7f),
    ];
    for (size, off, want) in cases {
        let p = P::new().ldxs(size, 0, 1, off).exit().build();
        assert_eq!(run_both_mem(p, &mem).0, want, "{size:?} at {off}");
    }
}

#[test]
fn stores_of_every_size_truncate() {
    for (size, want) in [
        (B, [0x88, 0, 0, 0, 0, 0, 0, 0]),
        (H, [0x88, 0x77, 0, 0, 0, 0, 0, 0]),
        (W, [0x88, 0x77, 0x66, 0x55, 0, 0, 0, 0]),
        (DW, [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]),
    ] {
        let p = P::new()
            .lddw(2, 0x1122_3344_5566_7788)
            .st(size, 1, 0, r(2))
            .mov(0, k(0))
            .exit()
            .build();
        assert_eq!(run_both_mem(p, &[0; 8]).1, want, "{size:?}");
    }
}

#[test]
fn immediate_stores_sign_extend_the_imm() {
    let p = P::new()
        .st(DW, 1, 0, k(-2))
        .st(H, 1, 8, k(0x12345))
        .mov(0, k(0))
        .exit()
        .build();
    let (_, mem) = run_both_mem(p, &[0; 10]);
    assert_eq!(&mem[..8], &(-2i64).to_le_bytes());
    assert_eq!(&mem[8..], &[0x45, 0x23]);
}

#[test]
fn stack_round_trip_below_r10() {
    let p = P::new()
        .lddw(1, 0xaabb_ccdd_eeff_0011)
        .st(DW, 10, -8, r(1))
        .st(W, 10, -512, k(7))
        .ldx(DW, 0, 10, -8)
        .ldx(W, 2, 10, -512)
        .add(0, r(2))
        .exit()
        .build();
    assert_eq!(run_both(p), 0xaabb_ccdd_eeff_0018);
}

#[test]
fn lddw_map_kinds_are_resolved_at_load() {
    let mut value = [0u8; 16];
    value[4] = 0x5a;
    let maps = vec![
        MapBinding {
            handle: 0xfeed,
            value: None,
            view: None,
        },
        MapBinding {
            handle: 0xbeef,
            value: Some(Region::of_mut_slice(&mut value)),
            view: None,
        },
    ];
    let p = P::new()
        .lddw_kind(LdDwKind::MapIdx, 2, 1)
        .lddw_kind(LdDwKind::MapIdxValue, 3, 1 | (4 << 32))
        .ldx(B, 0, 3, 0) // reads value[4] through the relocated pointer
        .st(B, 3, 1, k(0x66)) // writes value[5]
        .lddw_kind(LdDwKind::MapIdx, 4, 0)
        .alu64(AluOp::Sub, 4, k(0xfeed))
        .add(0, r(4))
        .alu64(AluOp::Sub, 2, k(0xbeef))
        .add(0, r(2))
        .exit()
        .build();
    let program = load(p, LoadOptions::bounds_checked().with_maps(maps));
    assert_eq!(program.run(&mut RunState::new(), &mut (), &[]), Ok(0x5a));
    assert_eq!(value[5], 0x66);
}

#[test]
fn lddw_func_loads_the_target_slot() {
    // 0-1: lddw r0, func +2 (relative to the slot after the lddw's first
    // slot, as the kernel counts) = slot 3; 2: exit; 3: exit
    let p = P::new()
        .lddw_kind(LdDwKind::Func, 0, 2)
        .exit()
        .exit()
        .build();
    assert_eq!(run_both(p), 3);
}

fn load_err(insns: Vec<Insn>, options: LoadOptions) -> LoadError {
    Program::new(insns, options).expect_err("load must fail")
}

#[test]
fn load_time_refusals() {
    let opts = LoadOptions::bounds_checked;
    assert_eq!(load_err(vec![], opts()), LoadError::Empty);
    let ld_abs = Insn::LdPacket {
        size: Size::B,
        indirect: None,
        imm: 0,
    };
    let err = load_err(P::new().insn(ld_abs).exit().build(), opts());
    assert_eq!(err, LoadError::LegacyPacketLoad { pc: 0 });
    assert!(err.to_string().contains("not supported for XDP"));
    for kind in [LdDwKind::MapFd, LdDwKind::MapValue, LdDwKind::BtfId] {
        let err = load_err(P::new().lddw_kind(kind, 0, 3).exit().build(), opts());
        assert_eq!(err, LoadError::UnrelocatedLdDw { pc: 0, kind });
    }
    assert_eq!(
        load_err(
            P::new().lddw_kind(LdDwKind::MapIdx, 0, 2).exit().build(),
            opts()
        ),
        LoadError::MapIndexOutOfRange {
            pc: 0,
            index: 2,
            count: 0
        }
    );
    // A map reference whose second slot's imm is not 0: the kernel's
    // "unrecognized bpf_ld_imm64 insn".
    let one_map = vec![MapBinding {
        handle: 1,
        value: None,
        view: None,
    }];
    let err = load_err(
        P::new()
            .lddw_kind(LdDwKind::MapIdx, 0, 7 << 32)
            .exit()
            .build(),
        opts().with_maps(one_map),
    );
    assert_eq!(err, LoadError::MapRefUpperHalf { pc: 0, upper: 7 });
    assert!(err.to_string().contains("unrecognized bpf_ld_imm64"));
    let no_value = vec![MapBinding {
        handle: 1,
        value: None,
        view: None,
    }];
    assert_eq!(
        load_err(
            P::new()
                .lddw_kind(LdDwKind::MapIdxValue, 0, 0)
                .exit()
                .build(),
            opts().with_maps(no_value)
        ),
        LoadError::MapHasNoValue { pc: 0, index: 0 }
    );
    let small = vec![MapBinding {
        handle: 1,
        value: Some(Region::writable(0x1000, 8)),
        view: None,
    }];
    assert!(matches!(
        load_err(
            P::new()
                .lddw_kind(LdDwKind::MapIdxValue, 0, 8 << 32)
                .exit()
                .build(),
            opts().with_maps(small)
        ),
        LoadError::MapValueOffsetOutOfRange { offset: 8, .. }
    ));
    assert_eq!(
        load_err(P::new().call(5).exit().build(), opts()),
        LoadError::UnknownHelper { pc: 0, id: 5 }
    );
    assert_eq!(
        load_err(
            P::new()
                .insn(Insn::Call(CallTarget::Kfunc(77)))
                .exit()
                .build(),
            opts()
        ),
        LoadError::UnknownKfunc { pc: 0, id: 77 }
    );
    assert_eq!(
        load_err(P::new().mov(10, k(0)).exit().build(), opts()),
        LoadError::WritesFramePointer { pc: 0 }
    );
    assert_eq!(
        load_err(P::new().mov(11, k(0)).exit().build(), opts()),
        LoadError::BadRegister { pc: 0, reg: 11 }
    );
    // Fetching atomics write their source register.
    assert_eq!(
        load_err(
            P::new()
                .atomic(Width::W64, bpfjet_isa::AtomicOp::Add, true, 1, 10, 0)
                .exit()
                .build(),
            opts()
        ),
        LoadError::WritesFramePointer { pc: 0 }
    );
    assert!(matches!(
        load_err(P::new().ja(5).exit().build(), opts()),
        LoadError::BadTarget { pc: 0, .. }
    ));
    // Into the middle of an lddw.
    assert!(matches!(
        load_err(P::new().ja(1).lddw(0, 1).exit().build(), opts()),
        LoadError::BadTarget {
            pc: 0,
            target: 2,
            ..
        }
    ));
    assert_eq!(
        load_err(vec![Insn::LdDwTail, Insn::Exit], opts()),
        LoadError::StrayLdDwTail { pc: 0 }
    );
    assert_eq!(
        load_err(
            vec![
                Insn::LdDw {
                    kind: LdDwKind::Imm,
                    dst: 0,
                    imm: 0
                },
                Insn::Exit
            ],
            opts()
        ),
        LoadError::BrokenLdDw { pc: 0 }
    );
    assert!(matches!(
        load_err(
            P::new().alu32(AluOp::MovSx(32), 0, r(1)).exit().build(),
            opts()
        ),
        LoadError::InvalidInsn { pc: 0, .. }
    ));
}
