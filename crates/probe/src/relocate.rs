//! Moving a function's first instructions into a trampoline (iced-x86).
//!
//! The entry patch overwrites 5 bytes with `jmp rel32`; the whole
//! instructions those bytes cover run instead from the trampoline, re-encoded
//! for their new address (RIP-relative operands and relative branches fixed
//! up by iced's block encoder), followed by a jump back to the first byte
//! after them.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock,
};

pub const JMP_REL32_LEN: usize = 5;

/// The instructions displaced by an entry patch.
#[derive(Debug)]
pub struct Displaced {
    /// Bytes covered by whole instructions (≥ 5).
    pub len: usize,
    /// Their re-encoding at the trampoline address, with the jump back.
    pub code: Vec<u8>,
}

/// Decodes from `ip` (the bytes in `code`, which span the rest of the
/// function when its size is known) and relocates the first instructions to
/// `new_ip`. `Err` says why the function cannot be patched safely.
pub fn displace(code: &[u8], ip: u64, new_ip: u64) -> Result<Displaced, String> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut moved: Vec<Instruction> = Vec::new();
    let mut len = 0usize;
    while len < JMP_REL32_LEN {
        if !dec.can_decode() {
            return Err(format!(
                "the function is {len} bytes long, too short for a 5-byte jump"
            ));
        }
        let ins = dec.decode();
        if ins.is_invalid() {
            return Err(format!("undecodable instruction at {:#x}", ins.ip()));
        }
        match ins.flow_control() {
            FlowControl::Return | FlowControl::Exception | FlowControl::Interrupt
                if len + ins.len() < JMP_REL32_LEN =>
            {
                return Err(format!(
                    "the function ends ({:?}) within its first 5 bytes",
                    ins.mnemonic()
                ));
            }
            _ => {}
        }
        len += ins.len();
        moved.push(ins);
    }
    // Nothing in the rest of the function may jump into the displaced bytes
    // (their start is fine: it is the patched jump).
    let inside = |t: u64| t > ip && t < ip + len as u64;
    for ins in dec.iter() {
        let target = match ins.flow_control() {
            FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::Call => ins.near_branch_target(),
            _ => 0,
        };
        if target != 0 && inside(target) {
            return Err(format!(
                "the instruction at {:#x} jumps into the first {len} bytes (to {target:#x})",
                ins.ip()
            ));
        }
    }
    for ins in &moved {
        let t = ins.near_branch_target();
        if t != 0 && inside(t) {
            return Err(format!(
                "a displaced instruction branches into the displaced bytes ({t:#x})"
            ));
        }
    }
    with_jump_back(moved, ip + len as u64, new_ip, len)
}

/// `moved` re-encoded at `new_ip` (RIP-relative operands and relative
/// branches fixed up by iced's block encoder), followed by a jump back to
/// `back`: the `len` displaced bytes' replacement.
fn with_jump_back(
    mut moved: Vec<Instruction>,
    back: u64,
    new_ip: u64,
    len: usize,
) -> Result<Displaced, String> {
    moved.push(
        Instruction::with_branch(Code::Jmp_rel32_64, back)
            .map_err(|e| format!("jump back: {e}"))?,
    );
    let encoded = BlockEncoder::encode(
        64,
        InstructionBlock::new(&moved, new_ip),
        BlockEncoderOptions::NONE,
    )
    .map_err(|e| format!("cannot relocate the displaced instructions: {e}"))?;
    Ok(Displaced {
        len,
        code: encoded.code_buffer,
    })
}

/// Relocates the one instruction at `ip` (the bytes in `code`) to
/// `new_ip`, followed by a jump back to the instruction after it: what an
/// `int3` probe executes out of line in place of the instruction whose
/// first byte it replaced ([`crate::breakpoint::attach_entry`]).
pub fn relocate_one(code: &[u8], ip: u64, new_ip: u64) -> Result<Displaced, String> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    if !dec.can_decode() {
        return Err(format!("no instruction at {ip:#x}"));
    }
    let ins = dec.decode();
    if ins.is_invalid() {
        return Err(format!("undecodable instruction at {ip:#x}"));
    }
    let len = ins.len();
    with_jump_back(vec![ins], ip + len as u64, new_ip, len)
}

/// Checks that no instruction of a whole function (`code`, starting at
/// `start`) branches into the bytes an entry patch at `ip` would displace
/// (after `ip` itself, which is the patched jump). For a patch inside a
/// function, where earlier instructions (a loop's back edge) may jump just
/// past `ip`. Indirect jumps (switch tables) cannot be followed; their
/// targets are case labels, which a `<sys/sdt.h>` probe's `nop` is not
/// followed by unless a case falls through to right after it.
pub fn check_no_branch_into(code: &[u8], start: u64, ip: u64) -> Result<(), String> {
    let at = (ip - start) as usize;
    let mut dec = Decoder::with_ip(
        64,
        code.get(at..).unwrap_or_default(),
        ip,
        DecoderOptions::NONE,
    );
    let mut len = 0usize;
    while len < JMP_REL32_LEN && dec.can_decode() {
        let ins = dec.decode();
        if ins.is_invalid() {
            return Err(format!("undecodable instruction at {:#x}", ins.ip()));
        }
        len += ins.len();
    }
    let inside = |t: u64| t > ip && t < ip + len as u64;
    let mut dec = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    for ins in dec.iter() {
        let target = match ins.flow_control() {
            FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::Call => ins.near_branch_target(),
            _ => 0,
        };
        if target != 0 && inside(target) {
            return Err(format!(
                "the instruction at {:#x} jumps into the {len} bytes the patch would replace (to {target:#x})",
                ins.ip()
            ));
        }
    }
    Ok(())
}

/// The bytes of `jmp rel32` from `from` to `to` (both within ±2 GiB).
pub fn jmp_rel32(from: u64, to: u64) -> [u8; 5] {
    let rel = to.wrapping_sub(from + 5) as i64;
    debug_assert!(rel >= i32::MIN as i64 && rel <= i32::MAX as i64);
    let r = (rel as i32).to_le_bytes();
    [0xE9, r[0], r[1], r[2], r[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocates_rip_relative_operand() {
        // lea rax,[rip+0x100]; push rbp; mov rbp,rsp; ret
        let code = [
            0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00, 0x55, 0x48, 0x89, 0xe5, 0xc3,
        ];
        let ip = 0x40_0000;
        let d = displace(&code, ip, ip + 0x1000).unwrap();
        assert_eq!(d.len, 7);
        let mut dec = Decoder::with_ip(64, &d.code, ip + 0x1000, DecoderOptions::NONE);
        let lea = dec.decode();
        assert_eq!(lea.ip_rel_memory_address(), ip + 7 + 0x100);
        let jmp = dec.decode();
        assert_eq!(jmp.near_branch_target(), ip + 7);
    }

    #[test]
    fn relocates_one_instruction_of_a_tiny_function() {
        // xor eax,eax; ret: the xor out of line, then a jump to the ret.
        let ip = 0x40_0000;
        let d = relocate_one(&[0x31, 0xc0, 0xc3], ip, ip + 0x1000).unwrap();
        assert_eq!(d.len, 2);
        let mut dec = Decoder::with_ip(64, &d.code, ip + 0x1000, DecoderOptions::NONE);
        assert_eq!(dec.decode().mnemonic(), iced_x86::Mnemonic::Xor);
        assert_eq!(dec.decode().near_branch_target(), ip + 2);
        // jmp rel8 (a tail call): re-encoded to reach the same target.
        let d = relocate_one(&[0xeb, 0x10], ip, ip + 0x1000).unwrap();
        let mut dec = Decoder::with_ip(64, &d.code, ip + 0x1000, DecoderOptions::NONE);
        assert_eq!(dec.decode().near_branch_target(), ip + 2 + 0x10);
    }

    #[test]
    fn refuses_tiny_function_and_back_jump() {
        // xor eax,eax; ret
        assert!(displace(&[0x31, 0xc0, 0xc3], 0x1000, 0x2000).is_err());
        // nop; nop; nop; nop; nop; nop; jmp back to +1
        let code = [0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xeb, 0xf9];
        let e = displace(&code, 0x1000, 0x2000).unwrap_err();
        assert!(e.contains("jumps into"), "{e}");
    }
}
