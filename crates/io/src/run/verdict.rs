//! What a program decided about one packet.

use std::fmt;

use crate::OutputRoute;

pub use bpfjet_runtime::worker::{Egress, EgressCopy};

/// Where an `XDP_REDIRECT` sends the packet, as far as the program's maps
/// say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RedirectTarget {
    /// An interface: `bpf_redirect(ifindex)` or a DEVMAP/DEVMAP_HASH entry.
    Ifindex(u32),
    /// An AF_XDP socket: the key of an XSKMAP entry (by convention the
    /// queue index the socket is bound to).
    XskQueue(u32),
    /// A CPUMAP entry.
    Cpu(u32),
    /// `BPF_F_BROADCAST` over a devmap: a copy to each of its interfaces.
    Broadcast,
    /// A redirect whose target the engine could not tell (an engine that
    /// does not report targets).
    Unknown,
}

impl fmt::Display for RedirectTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectTarget::Ifindex(i) => write!(f, "ifindex {i}"),
            RedirectTarget::XskQueue(q) => write!(f, "xsk queue {q}"),
            RedirectTarget::Cpu(c) => write!(f, "cpu {c}"),
            RedirectTarget::Broadcast => f.write_str("broadcast"),
            RedirectTarget::Unknown => f.write_str("unknown"),
        }
    }
}

/// The program's action and, for `XDP_REDIRECT`, its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub route: OutputRoute,
    /// Set only when `route` is [`OutputRoute::Redirect`].
    pub redirect: Option<RedirectTarget>,
    /// [`Verdict::copies`], [`NO_COPIES`] for None: a plain u32 keeps the
    /// verdict at 16 bytes (an `Option<u32>` made it 20).
    copies: u32,
}

const NO_COPIES: u32 = u32::MAX;

impl Verdict {
    pub const ABORTED: Verdict = Verdict::of(OutputRoute::Aborted);
    pub const DROP: Verdict = Verdict::of(OutputRoute::Drop);
    pub const PASS: Verdict = Verdict::of(OutputRoute::Pass);
    pub const TX: Verdict = Verdict::of(OutputRoute::Tx);

    pub const fn of(route: OutputRoute) -> Verdict {
        Verdict {
            route,
            redirect: None,
            copies: NO_COPIES,
        }
    }

    pub const fn redirect(target: RedirectTarget) -> Verdict {
        Verdict {
            route: OutputRoute::Redirect,
            redirect: Some(target),
            copies: NO_COPIES,
        }
    }

    /// The frame leaves as this many of the batch's [`EgressCopy`]s (a
    /// broadcast, a devmap entry's program, a CPUMAP redirect), not from
    /// its own buffer; None for every other frame.
    #[inline]
    pub fn copies(&self) -> Option<u32> {
        (self.copies != NO_COPIES).then_some(self.copies)
    }

    #[inline]
    pub fn set_copies(&mut self, n: u32) {
        self.copies = n.min(NO_COPIES - 1);
    }

    /// From a program's return value; a redirect without a known target
    /// gets [`RedirectTarget::Unknown`].
    pub fn from_retval(retval: u64, target: Option<RedirectTarget>) -> Verdict {
        match OutputRoute::from_xdp_action(retval) {
            OutputRoute::Redirect => Verdict::redirect(target.unwrap_or(RedirectTarget::Unknown)),
            route => Verdict::of(route),
        }
    }
}
