//! Mutation test: programs derived from the NF corpus and the accepted twins
//! of the negative corpus by random edits (offsets, immediates, registers,
//! dropped bounds checks). Whenever bpfjet accepts a mutant, it runs in the
//! bounds-checked interpreter on random packets with stub helpers that check
//! their memory arguments; any out-of-bounds access is a verifier soundness
//! bug.

mod common;
use common::Rng;

use bpfjet_isa::{decode_program, encode_program, Insn, JmpOp, Operand, Width};
use bpfjet_maps::MapSpec;
use bpfjet_runtime::{
    Access, Fault, Helper, HelperRegistry, LoadOptions, MapBinding, Program, Region, RunState,
};
use bpfjet_verifier::proto::{helper_protos, ArgType};
use bpfjet_verifier::{verify, Facts, VerifyEnv, XdpMdField};

fn mutate(prog: &[Insn], rng: &mut Rng) -> Option<Vec<Insn>> {
    let mut p = prog.to_vec();
    for _ in 0..1 + rng.below(3) {
        let pc = rng.below(p.len() as u64) as usize;
        let delta = |rng: &mut Rng| (rng.below(33) as i64 - 16) as i16;
        p[pc] = match p[pc] {
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => Insn::Load {
                size,
                sign_extend,
                dst,
                src: if rng.below(8) == 0 {
                    rng.below(11) as u8
                } else {
                    src
                },
                off: off.wrapping_add(delta(rng)),
            },
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => Insn::Store {
                size,
                dst,
                off: off.wrapping_add(delta(rng)),
                src,
            },
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => Insn::Alu {
                width,
                op,
                dst,
                src: match src {
                    Operand::Imm(i) => Operand::Imm(i.wrapping_add(delta(rng) as i32)),
                    Operand::Reg(r) => {
                        if rng.below(3) == 0 {
                            Operand::Reg(rng.below(11) as u8)
                        } else {
                            Operand::Reg(r)
                        }
                    }
                },
            },
            // Drop the check (fall through) or invert it.
            Insn::Jmp {
                width,
                op,
                dst,
                src,
                off,
            } => match rng.below(3) {
                0 => Insn::Ja { off: 0 },
                1 => Insn::Jmp {
                    width,
                    op: if op == JmpOp::Jgt {
                        JmpOp::Jge
                    } else {
                        JmpOp::Jgt
                    },
                    dst,
                    src,
                    off,
                },
                _ => Insn::Jmp {
                    width,
                    op,
                    dst,
                    src: match src {
                        Operand::Imm(i) => Operand::Imm(i.wrapping_add(delta(rng) as i32)),
                        r => r,
                    },
                    off,
                },
            },
            other => other,
        };
    }
    decode_program(&encode_program(&p)).ok()
}

/// What the stub helpers see through `HelperCtx::user`.
struct World {
    values: Vec<Vec<u8>>,
    /// Each map's handle points at its block here, as the runtime's point
    /// at the map's kernel view (read-only, `KERNEL_VIEW_BYTES` long).
    views: Vec<Vec<u8>>,
    ringbuf: Vec<u8>,
    rng: Rng,
}

fn stub_helpers(maps: &[MapSpec]) -> HelperRegistry {
    let mut reg = HelperRegistry::new();
    let key_sizes: Vec<(u32, u32)> = maps.iter().map(|m| (m.key_size, m.value_size)).collect();
    // Arrays: lookups fail only for keys out of range (the verifier relies on it).
    let arrays: Vec<Option<u32>> = maps
        .iter()
        .map(|m| {
            matches!(
                m.map_type,
                bpfjet_maps::MapType::Array | bpfjet_maps::MapType::PercpuArray
            )
            .then_some(m.max_entries)
        })
        .collect();
    for proto in helper_protos() {
        let p = *proto;
        let sizes = key_sizes.clone();
        let arrays = arrays.clone();
        reg.register(Helper::new(p.id as u32, p.name, move |ctx, args| {
            // Every memory argument must be accessible as the prototype says.
            let idx = {
                let world = ctx.user_ctx::<World>()?;
                world
                    .views
                    .iter()
                    .position(|v| v.as_ptr() as u64 == args[0])
            };
            let map = idx.and_then(|i| sizes.get(i)).copied();
            for (i, a) in p.args.iter().enumerate() {
                let (len, access) = match a {
                    ArgType::PtrToMem { maybe_null, rdonly } => {
                        if *maybe_null && args[i] == 0 {
                            continue;
                        }
                        (
                            args[i + 1],
                            if *rdonly { Access::Read } else { Access::Write },
                        )
                    }
                    ArgType::PtrToUninitMem => (args[i + 1], Access::Write),
                    ArgType::PtrToMapKey => (map.map_or(0, |m| m.0) as u64, Access::Read),
                    ArgType::PtrToMapValue => (map.map_or(0, |m| m.1) as u64, Access::Read),
                    ArgType::PtrToUninitMapValue => (map.map_or(0, |m| m.1) as u64, Access::Write),
                    _ => continue,
                };
                if len > 0 {
                    ctx.check_mem(args[i], len, access)?;
                }
            }
            let array_max = idx.and_then(|i| arrays.get(i)).copied().flatten();
            let array_key_ok = match (p.id, array_max) {
                (1, Some(max)) => {
                    let k = ctx.read_mem(args[1], 4)?;
                    Some(u32::from_le_bytes([k[0], k[1], k[2], k[3]]) < max)
                }
                _ => None,
            };
            let world = ctx.user_ctx::<World>()?;
            let null = match array_key_ok {
                Some(ok) => !ok,
                None => world.rng.below(4) == 0,
            };
            Ok(match p.id {
                1 => match idx {
                    Some(i) if !null => world.values[i].as_ptr() as u64,
                    _ => 0,
                },
                131 if !null && args[1] <= world.ringbuf.len() as u64 => {
                    world.ringbuf.as_ptr() as u64
                }
                131 => 0,
                // bpf_dynptr_data: a slice of the constant length, or NULL.
                203 if !null && args[2] <= world.ringbuf.len() as u64 => {
                    world.ringbuf.as_ptr() as u64
                }
                203 => 0,
                44 | 54 | 65 | 12 => u64::MAX, // failure: the packet stays as it is
                _ => world.rng.next() & 0xff,
            })
        }));
    }
    reg
}

/// Rewrite the xdp_md loads to this test's context (8-byte fields), as the
/// loader does with the verifier's facts.
fn rewrite_ctx(prog: &mut [Insn], facts: &Facts) {
    for (&pc, access) in &facts.ctx_accesses {
        if let Insn::Load { dst, src, .. } = prog[pc] {
            let off = (access.field.offset() * 2) as i16;
            let size = if access.field.is_pointer() {
                bpfjet_isa::Size::DW
            } else {
                bpfjet_isa::Size::W
            };
            prog[pc] = Insn::Load {
                size,
                sign_extend: false,
                dst,
                src,
                off,
            };
        }
    }
}

fn run_mutant(
    prog: &[Insn],
    facts: &Facts,
    maps: &[MapSpec],
    rng: &mut Rng,
    packets: usize,
) -> Result<usize, String> {
    let mut insns = prog.to_vec();
    rewrite_ctx(&mut insns, facts);
    let mut world = World {
        // Global data as loaded: the verifier folds frozen `.rodata`
        // values (a sampling period), so the run must see the same ones.
        values: maps
            .iter()
            .map(|m| {
                let mut v = vec![0u8; m.value_size.max(1) as usize];
                if let Some(init) = &m.initial_data {
                    let n = init.len().min(v.len());
                    v[..n].copy_from_slice(&init[..n]);
                }
                v
            })
            .collect(),
        views: maps
            .iter()
            .map(|_| vec![0u8; bpfjet_maps::KERNEL_VIEW_BYTES])
            .collect(),
        ringbuf: vec![0u8; 4096],
        rng: Rng(rng.next() | 1),
    };
    let bindings: Vec<MapBinding> = maps
        .iter()
        .enumerate()
        .map(|(i, m)| MapBinding {
            handle: world.views[i].as_ptr() as u64,
            value: Some(Region::writable(
                world.values[i].as_mut_ptr() as u64,
                m.value_size as u64,
            )),
            view: Some(Region::of_slice(&world.views[i])),
        })
        .collect();
    let program = Program::new(
        insns,
        LoadOptions::bounds_checked()
            .with_helpers(stub_helpers(maps))
            .with_maps(bindings),
    )
    .map_err(|e| format!("load: {e}"))?;
    let mut state = RunState::new();
    state.set_insn_budget(Some(200_000));
    for v in &mut world.values {
        state.add_region(Region::of_mut_slice(v));
    }
    state.add_region(Region::of_mut_slice(&mut world.ringbuf));
    let mut ran = 0;
    for _ in 0..packets {
        let len = rng.below(160) as usize;
        let mut buf = vec![0u8; 256 + len];
        for b in buf.iter_mut() {
            *b = rng.next() as u8;
        }
        let data = buf.as_mut_ptr() as u64 + 256;
        let mut ctx = [0u64; 6];
        ctx[XdpMdField::Data as usize] = data;
        ctx[XdpMdField::DataEnd as usize] = data + len as u64;
        ctx[XdpMdField::DataMeta as usize] = data;
        ctx[3] = 1;
        let mut run_state_regions = RunState::new();
        std::mem::swap(&mut run_state_regions, &mut state);
        run_state_regions.add_region(Region::read_only(ctx.as_ptr() as u64, 48));
        run_state_regions.add_region(Region::writable(data, len as u64));
        let r = program.run(&mut run_state_regions, &mut world, &[ctx.as_ptr() as u64]);
        run_state_regions.clear_regions();
        std::mem::swap(&mut run_state_regions, &mut state);
        for v in &mut world.values {
            state.add_region(Region::of_mut_slice(v));
        }
        state.add_region(Region::of_mut_slice(&mut world.ringbuf));
        match r {
            Ok(_) | Err(Fault::BudgetExceeded { .. }) => ran += 1,
            Err(
                f @ (Fault::OutOfBounds { .. }
                | Fault::Misaligned { .. }
                | Fault::BadPc { .. }
                | Fault::BadSubprogram { .. }),
            ) => return Err(format!("{f} (packet of {len} bytes)")),
            Err(_) => ran += 1,
        }
    }
    Ok(ran)
}

#[test]
fn accepted_mutants_never_fault() {
    let mut sources: Vec<(String, Vec<Insn>, Vec<MapSpec>)> = Vec::new();
    for path in common::nf_objects() {
        let obj = bpfjet_obj::load_file(&path).unwrap();
        for p in &obj.programs {
            sources.push((
                p.name.clone(),
                decode_program(&p.insns).unwrap(),
                obj.maps.clone(),
            ));
        }
    }
    for v in common::load_corpus().into_iter().filter(|v| v.expect.0) {
        if let Ok(insns) = decode_program(&common::slots(&v.bytes)) {
            sources.push((format!("{}/{}", v.case, v.name), insns, v.maps));
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let rounds: usize = std::env::var("BPFJET_MUTANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20000);
    let (mut tried, mut accepted, mut runs) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for _ in 0..rounds {
        let (name, prog, maps) = &sources[rng.below(sources.len() as u64) as usize];
        let Some(mutant) = mutate(prog, &mut rng) else {
            continue;
        };
        tried += 1;
        let env = VerifyEnv::new(maps);
        let Ok(facts) = verify(&mutant, &env) else {
            continue;
        };
        accepted += 1;
        match run_mutant(&mutant, &facts, maps, &mut rng, 16) {
            Ok(n) => runs += n,
            Err(e) => failures.push(format!(
                "{name}: accepted mutant faults: {e}\n{}",
                bpfjet_isa::disassemble(&mutant)
            )),
        }
        if failures.len() > 3 {
            break;
        }
    }
    println!(
        "mutants tried: {tried}, accepted by bpfjet: {accepted}, packets run: {runs}, faults: {}",
        failures.len()
    );
    let _ = Width::W64;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
