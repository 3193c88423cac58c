//! `bpfjet asm FILE [-o OUT]`.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::ExitCode;

pub fn run(file: &Path, output: Option<&Path>) -> Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let bytes = bpfjet_isa::asm::assemble_bytes(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    match output {
        Some(out) => {
            std::fs::write(out, &bytes).with_context(|| format!("writing {}", out.display()))?
        }
        None => {
            for slot in bytes.chunks(8) {
                println!(
                    "{}",
                    slot.iter().map(|b| format!("{b:02x}")).collect::<String>()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
