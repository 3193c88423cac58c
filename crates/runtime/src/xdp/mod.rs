//! The XDP program type: the packet frame a program runs on, the context
//! structure it sees, and the load-time rewrite of its `xdp_md` accesses.

pub mod context;
pub mod frame;
pub mod rewrite;

pub use context::{CtxField, XdpMd};
pub use frame::XdpFrame;
pub use rewrite::{find_ctx_accesses, rewrite_ctx_accesses, CtxAccess, CtxError};

/// XDP actions (`enum xdp_action`), the values a program returns.
pub mod action {
    pub const ABORTED: u32 = 0;
    pub const DROP: u32 = 1;
    pub const PASS: u32 = 2;
    pub const TX: u32 = 3;
    pub const REDIRECT: u32 = 4;

    /// The name `bpfjet run --json` and the fixtures use for an action.
    pub fn name(action: u32) -> Option<&'static str> {
        Some(match action {
            ABORTED => "ABORTED",
            DROP => "DROP",
            PASS => "PASS",
            TX => "TX",
            REDIRECT => "REDIRECT",
            _ => return None,
        })
    }
}
