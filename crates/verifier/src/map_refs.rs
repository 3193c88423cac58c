//! The map references of every `lddw`, checked before the analysis: the
//! kernel resolves them all when the program is loaded
//! (`resolve_pseudo_ldimm64`), whether the path analysis reaches them or
//! not, so a bad reference in dead code is still a rejection.

use crate::env::VerifyEnv;
use crate::error::VerifyError;
use bpfjet_isa::{Insn, LdDwKind};
use bpfjet_maps::MapType;

pub(crate) fn check(program: &[Insn], env: &VerifyEnv) -> Result<(), VerifyError> {
    for (pc, insn) in program.iter().enumerate() {
        let Insn::LdDw { kind, imm, .. } = *insn else {
            continue;
        };
        let fail = |message: String| {
            let mut e = VerifyError::new("bad_map", message);
            e.pc = Some(pc);
            e.insn_text = bpfjet_isa::format_insn(insn, Some(pc));
            Err(e)
        };
        match kind {
            LdDwKind::MapIdx | LdDwKind::MapIdxValue => {}
            // Objects refer to maps by index; a file descriptor or a kernel
            // BTF id means nothing to bpfjet.
            LdDwKind::MapFd | LdDwKind::MapValue => {
                return fail(
                    "lddw with a map fd: bpfjet programs refer to maps by index (PSEUDO_MAP_IDX)"
                        .to_string(),
                )
            }
            LdDwKind::BtfId => {
                return fail("lddw of a BTF id (kernel variable) is not supported".to_string())
            }
            LdDwKind::Imm | LdDwKind::Func => continue,
        }
        let index = imm as u32;
        let Some(spec) = env.maps.get(index as usize) else {
            return fail(format!(
                "lddw refers to map #{index}, the program has {} maps",
                env.maps.len()
            ));
        };
        // check_map_prog_compatibility: the kernel's "tracing" types (not
        // BPF_PROG_TYPE_TRACING) may not use a map with a bpf_timer.
        let tracing = env.prog_type.is_tracing() && env.prog_type != crate::env::ProgType::Tracing;
        let has_timer = env.map_fields.get(index as usize).is_some_and(|fields| {
            fields
                .iter()
                .any(|f| f.kind == bpfjet_obj::FieldKind::Timer)
        });
        if tracing && has_timer {
            return fail("tracing progs cannot use bpf_timer yet".to_string());
        }
        if kind == LdDwKind::MapIdxValue {
            let off = (imm >> 32) as u32;
            // Only a one-element (non-per-CPU) array has a direct value address.
            if spec.map_type != MapType::Array || spec.max_entries != 1 {
                return fail(format!(
                    "map #{index} ({}) does not support direct value access",
                    spec.name
                ));
            }
            if off >= spec.value_size {
                return fail(format!(
                    "invalid access to map value pointer, value_size={} off={off}",
                    spec.value_size
                ));
            }
        }
    }
    Ok(())
}
