//! The one interface every executor of `bpf()` commands implements.

use crate::command::Command;
use crate::errno::Errno;

/// Executes decoded `bpf()` commands. The return value is what `bpf()`
/// returns on success: a new file descriptor, or 0.
///
/// # Safety contract
/// A command's addresses point into the calling process's memory, as the
/// kernel receives them; implementations read and write through them and
/// callers must pass addresses valid for the sizes the command states.
pub trait Backend {
    fn execute(&self, cmd: &Command) -> Result<i64, Errno>;
}
